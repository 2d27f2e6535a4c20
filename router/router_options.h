// Configuration of one pkv-router process. Filled from command-line flags by router_flags.cc (the
// binary) or directly by tests; the library never reads flags itself. Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "api/request_validation.h"
#include "common/tls.h"
#include "router/connection_guard.h"

namespace pkv::router {

struct RouterOptions {
  std::string listen = "127.0.0.1:50051";  // client-facing gRPC (port 0 = pick one)
  std::vector<std::string> workers;        // static host:port list, one pkv-worker each
  // DNS discovery (router/dns_discovery.h): "name:port" whose A records are workers (a headless
  // Service), re-resolved every dns_interval; next to `workers`. Empty = off.
  std::string workers_dns;
  absl::Duration dns_interval = absl::Seconds(5);
  int max_workers = 1024;  // worker slots (static + discovered): bounds the registry's memory

  // Admission: at most max_inflight streams run; up to max_queue more wait at most
  // queue_timeout for a slot; beyond that RESOURCE_EXHAUSTED with grpc-retry-pushback-ms.
  int max_inflight = 64;
  int max_queue = 64;
  // ... and at most this many prompt tokens wait in the queue (token ids, or the bytes of a text
  // prompt as an upper bound), so a few huge prompts cannot hold the queue's memory either.
  int max_queue_tokens = 1 << 20;
  absl::Duration queue_timeout = absl::Seconds(5);
  absl::Duration retry_pushback = absl::Seconds(1);  // sent as the grpc-retry-pushback-ms trailer

  // Worker registry. A worker is placeable when its last health check said SERVING, it is not
  // draining, and its ModelInfo is known. unhealthy_threshold consecutive failed checks
  // (health_timeout each) mark it unhealthy; a refused connection on a Generate does so at once.
  absl::Duration health_interval = absl::Milliseconds(500);
  absl::Duration health_timeout = absl::Milliseconds(500);
  int unhealthy_threshold = 2;
  absl::Duration load_interval = absl::Milliseconds(250);
  std::string worker_health_service = "pkv.v1.Worker";
  // Circuit breaker per worker (router/circuit_breaker.h): ejection k lasts
  // min(eject_max, eject_base * 2^(k-1)) x jitter [0.5, 1); a streak is forgotten after
  // eject_reset without an ejection.
  absl::Duration eject_base = absl::Milliseconds(500);
  absl::Duration eject_max = absl::Seconds(3);
  absl::Duration eject_reset = absl::Seconds(30);
  // Keepalive pings on worker channels (RELIABILITY.md 3.0: keepalive 1 s / timeout 1 s); gRPC
  // takes them in whole milliseconds.
  absl::Duration worker_keepalive = absl::Seconds(1);
  absl::Duration worker_keepalive_timeout = absl::Seconds(1);

  // Streams. A worker stream silent for stall_timeout while tokens are expected counts as a
  // lost worker. Before the first token a lost/refusing worker is replaced, up to max_attempts
  // placements in total, with jittered exponential backoff from retry_backoff.
  absl::Duration stall_timeout = absl::Seconds(3);
  int max_attempts = 3;
  absl::Duration retry_backoff = absl::Milliseconds(50);
  absl::Duration retry_backoff_max = absl::Seconds(1);
  // Mid-stream migration (replay prompt + emitted tokens on another worker, README
  // "Reliability"): at most this many moves per stream; beyond (or 0 = off) a worker lost after
  // tokens were sent ends the stream with ABORTED + trailer tokens-emitted.
  int max_migrations = 2;

  // Session affinity map bound (LRU eviction beyond it).
  int max_sessions = 100000;
  // Prefix-aware placement (placement.h): prefer the worker that likely caches the prompt's
  // prefix, within a load bound.
  bool prefix_routing = true;

  // Client-facing server limits (RELIABILITY.md P1/P4/S3/S5).
  int max_request_bytes = 1 << 20;
  int max_concurrent_streams = 100;
  int max_metadata_bytes = 8 << 10;  // request headers (incl. the API key) per call
  // A connection that has not finished its TLS handshake and HTTP/2 preface by then is closed
  // (RELIABILITY S1; gRPC's default is 120 s). gRPC takes it in whole milliseconds.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // A client that leaves one write (or the final status) unread this long is cancelled, which
  // frees its admission slot and the worker's KV pages (zero = never).
  absl::Duration client_write_timeout = absl::Seconds(30);
  // Per client connection, in any one-second window (router/connection_guard.h, RELIABILITY S5):
  // streams opened and streams the client reset; past either the connection is closed. 0 = off.
  // Counts per second, not durations.
  int max_streams_per_connection_per_second = 2000;
  int max_resets_per_connection_per_second = 200;

  // Security. An empty TlsFiles means plaintext (the binary demands --insecure for that).
  TlsFiles client_tls;  // --tls_cert/--tls_key; --tls_ca: verifies client certificates
  // With client_tls.ca_file: every client must show a certificate (else: only when it shows one
  // is it verified, and API keys authenticate the rest).
  bool require_client_cert = false;
  TlsFiles worker_tls;  // --worker_tls_cert/key/ca: mutual TLS to the workers (all three)
  // Name checked against the workers' certificates instead of each address's host (for workers
  // reached by IP whose certificates carry DNS names). Empty = the address's host.
  std::string worker_tls_server_name;
  // One API key per line (router/api_key_auth.h); empty = no API-key authentication.
  std::string api_keys_file;

  // The OpenAI-compatible HTTP API (router/openai/openai_frontend.h) on its own port: "" = off.
  // It uses the same TLS files (client_tls), API keys, admission limits and metrics as gRPC.
  std::string http_listen;
  std::string served_model_name;    // the model name HTTP clients use; "" = the workers'
  int http_threads = 2;             // HTTP I/O threads (connections cost no thread)
  int http_max_connections = 1024;  // more are closed as soon as they are accepted
  int http_max_body_bytes = 4 << 20;
  // A request's headers and body must arrive within this (RELIABILITY: slow senders).
  absl::Duration http_read_timeout = absl::Seconds(10);
  // The longest one HTTP completion may run; the client's disconnect ends it sooner.
  absl::Duration http_request_timeout = absl::Minutes(10);

  api::RequestLimits limits;
};

// RouterOptions plus the settings only the binary (router/main.cc) uses.
struct RouterProcessOptions {
  RouterOptions router;
  std::string metrics_listen = "127.0.0.1:9100";  // Prometheus /metrics; empty = off
  // On SIGTERM/SIGINT in-flight streams get this long to finish (zero: cancelled at once).
  absl::Duration drain_timeout = absl::Seconds(30);
};

// Splits "host:port,host:port" into addresses; rejects empty entries and entries without a port.
absl::StatusOr<std::vector<std::string>> ParseWorkerList(absl::string_view list);

// Checks ranges (positive intervals, no negative timeouts, max_attempts >= 1, ...) and that some
// worker source (--workers, --workers_dns, or `num_in_process_workers` > 0: workers in the router's
// own process, colocated/) is given; INVALID_ARGUMENT naming the flag.
absl::Status ValidateRouterOptions(const RouterOptions& options, int num_in_process_workers = 0);

// ValidateRouterOptions plus the process-level settings; INVALID_ARGUMENT naming the flag.
absl::Status ValidateRouterProcessOptions(const RouterProcessOptions& options);

}  // namespace pkv::router
