// Configuration of one pkv-router process. Filled from command-line flags by router_flags.cc (the
// binary) or directly by tests; the library never reads flags itself. Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/request_validation.h"
#include "common/tls.h"
#include "router/connection_guard.h"

namespace pkv::router {

struct RouterOptions {
  std::string listen = "127.0.0.1:50051";  // client-facing gRPC (port 0 = pick one)
  std::vector<std::string> workers;        // static host:port list, one pkv-worker each
  // DNS discovery (router/dns_discovery.h): "name:port" whose A records are workers (a headless
  // Service), re-resolved every dns_interval_ms; next to `workers`. Empty = off.
  std::string workers_dns;
  int dns_interval_ms = 5000;
  int max_workers = 1024;  // worker slots (static + discovered): bounds the registry's memory

  // Admission: at most max_inflight streams run; up to max_queue more wait at most
  // queue_timeout_ms for a slot; beyond that RESOURCE_EXHAUSTED with grpc-retry-pushback-ms.
  int max_inflight = 64;
  int max_queue = 64;
  // ... and at most this many prompt tokens wait in the queue (token ids, or the bytes of a text
  // prompt as an upper bound), so a few huge prompts cannot hold the queue's memory either.
  int max_queue_tokens = 1 << 20;
  int queue_timeout_ms = 5000;
  int retry_pushback_ms = 1000;  // value of the grpc-retry-pushback-ms trailer

  // Worker registry. A worker is placeable when its last health check said SERVING, it is not
  // draining, and its ModelInfo is known. unhealthy_threshold consecutive failed checks (500 ms
  // deadline each) mark it unhealthy; a refused connection on a Generate does so at once.
  int health_interval_ms = 500;
  int health_timeout_ms = 500;
  int unhealthy_threshold = 2;
  int load_interval_ms = 250;
  std::string worker_health_service = "pkv.v1.Worker";
  // Circuit breaker per worker (router/circuit_breaker.h): ejection k lasts
  // min(eject_max_ms, eject_base_ms * 2^(k-1)) x jitter [0.5, 1); a streak is forgotten after
  // eject_reset_ms without an ejection.
  int eject_base_ms = 500;
  int eject_max_ms = 3000;
  int eject_reset_ms = 30000;
  int worker_keepalive_ms = 1000;  // RELIABILITY.md 3.0: keepalive 1 s / timeout 1 s
  int worker_keepalive_timeout_ms = 1000;

  // Streams. A worker stream silent for stall_timeout_ms while tokens are expected counts as a
  // lost worker. Before the first token a lost/refusing worker is replaced, up to max_attempts
  // placements in total, with jittered exponential backoff from retry_backoff_ms.
  int stall_timeout_ms = 3000;
  int max_attempts = 3;
  int retry_backoff_ms = 50;
  int retry_backoff_max_ms = 1000;
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
  // (RELIABILITY S1; gRPC's default is 120 s).
  int handshake_timeout_ms = 10000;
  // A client that leaves one write (or the final status) unread this long is cancelled, which
  // frees its admission slot and the worker's KV pages (0 = never).
  int client_write_timeout_ms = 30000;
  // Per client connection, in any one-second window (router/connection_guard.h, RELIABILITY S5):
  // streams opened and streams the client reset; past either the connection is closed. 0 = off.
  int max_streams_per_connection_s = 2000;
  int max_resets_per_connection_s = 200;

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
  int http_read_timeout_ms = 10000;
  // The longest one HTTP completion may run; the client's disconnect ends it sooner.
  int http_request_timeout_s = 600;

  api::RequestLimits limits;
};

// Splits "host:port,host:port" into addresses; rejects empty entries and entries without a port.
absl::StatusOr<std::vector<std::string>> ParseWorkerList(absl::string_view list);

// Checks ranges (positive intervals, max_attempts >= 1, ...) and that some worker source (--workers
// or --workers_dns) is given; INVALID_ARGUMENT naming the flag.
absl::Status ValidateRouterOptions(const RouterOptions& options);

}  // namespace pkv::router
