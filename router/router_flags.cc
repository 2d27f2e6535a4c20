#include "router/router_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "client-facing gRPC address (host:port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9100",
          "Prometheus /metrics address (host:port), separate from the gRPC port; empty = off");
ABSL_FLAG(std::string, http_listen, "",
          "OpenAI-compatible HTTP API address (host:port): /v1/chat/completions, /v1/completions, "
          "/v1/models, /health, /metrics; same TLS (--tls_cert/--tls_key) and API keys as gRPC; "
          "empty = off");
ABSL_FLAG(std::string, served_model_name, "",
          "model name HTTP clients send and /v1/models lists; empty = the workers' model name");
ABSL_FLAG(int, http_threads, 2, "HTTP I/O threads");
ABSL_FLAG(int, http_max_connections, 1024, "open HTTP connections, at most");
ABSL_FLAG(int, http_max_body_bytes, 4 << 20, "largest HTTP request body (413 beyond)");
ABSL_FLAG(int, http_read_timeout_ms, 10000,
          "an HTTP request's headers and body must arrive within this (408 otherwise)");
ABSL_FLAG(int, http_request_timeout_s, 600, "the longest one HTTP completion may run");
ABSL_FLAG(std::string, workers, "", "comma-separated host:port list of pkv-worker processes");
ABSL_FLAG(std::string, workers_dns, "",
          "name:port whose DNS A records are workers (a headless Service), re-resolved every "
          "--dns_interval_ms; next to --workers");
ABSL_FLAG(int, dns_interval_ms, 5000, "period of --workers_dns re-resolution");
ABSL_FLAG(int, max_workers, 1024, "worker slots, static + discovered (bounds memory)");
ABSL_FLAG(int, max_queue_tokens, 1 << 20, "prompt tokens waiting in the admission queue, at most");
ABSL_FLAG(int, eject_base_ms, 500, "first ejection of a failing worker (doubles per ejection)");
ABSL_FLAG(int, eject_max_ms, 3000, "longest ejection of a failing worker");
ABSL_FLAG(int, eject_reset_ms, 30000, "a worker this long without ejection starts a new streak");
ABSL_FLAG(int, max_inflight, 64, "Generate streams running at once");
ABSL_FLAG(int, max_queue, 64, "Generate streams waiting for a slot beyond --max_inflight");
ABSL_FLAG(int, queue_timeout_ms, 5000, "longest admission wait before RESOURCE_EXHAUSTED");
ABSL_FLAG(int, retry_pushback_ms, 1000, "grpc-retry-pushback-ms sent with RESOURCE_EXHAUSTED");
ABSL_FLAG(int, health_interval_ms, 500, "worker health-check period");
ABSL_FLAG(int, health_timeout_ms, 500, "deadline of each worker health check");
ABSL_FLAG(int, unhealthy_threshold, 2, "consecutive failed checks before a worker is unhealthy");
ABSL_FLAG(int, load_interval_ms, 250, "worker GetLoad polling period");
ABSL_FLAG(std::string, worker_health_service, "pkv.v1.Worker",
          "grpc.health.v1 service name checked on workers (readiness)");
ABSL_FLAG(int, worker_keepalive_ms, 1000, "keepalive ping period on worker channels");
ABSL_FLAG(int, worker_keepalive_timeout_ms, 1000, "keepalive ack timeout on worker channels");
ABSL_FLAG(int, stall_timeout_ms, 3000,
          "a worker stream silent this long while tokens are expected is a lost worker");
ABSL_FLAG(int, max_attempts, 3, "placements per request before its first token");
ABSL_FLAG(int, retry_backoff_ms, 50, "first retry backoff (doubles per attempt, jittered)");
ABSL_FLAG(int, retry_backoff_max_ms, 1000, "retry backoff cap");
ABSL_FLAG(int, max_migrations, 2,
          "mid-stream moves of a stream to another worker when its worker is lost after tokens "
          "were sent (prompt + tokens replayed; 0 = ABORTED instead)");
ABSL_FLAG(int, max_sessions, 100000, "session-affinity entries kept (LRU)");
ABSL_FLAG(bool, prefix_routing, true,
          "place a request on the worker that likely caches its prompt prefix (within a load "
          "bound)");
ABSL_FLAG(int, max_prompt_tokens, 0, "prompt token cap; 0 = the model's max_context - 1");
ABSL_FLAG(int, max_request_bytes, 1 << 20, "largest accepted request message");
ABSL_FLAG(int, max_concurrent_streams, 100, "HTTP/2 streams per client connection");
ABSL_FLAG(int, drain_timeout_s, 30, "on SIGTERM/SIGINT, how long in-flight streams may finish");
ABSL_FLAG(int, max_metadata_bytes, 8 << 10, "largest accepted request metadata (headers) per call");
ABSL_FLAG(int, handshake_timeout_ms, 10000,
          "close a client connection that has not completed TLS + HTTP/2 setup by then");
ABSL_FLAG(int, max_stop_strings, 16, "stop strings per request");
ABSL_FLAG(int, max_prompt_text_bytes, 1 << 20, "bytes of a text prompt");
ABSL_FLAG(int, client_write_timeout_ms, 30000,
          "cancel a stream whose client leaves a response unread this long (0 = never)");
ABSL_FLAG(int, max_streams_per_connection_s, 2000,
          "close a client connection that opens more streams than this in one second (0 = off)");
ABSL_FLAG(int, max_resets_per_connection_s, 200,
          "close a client connection that resets more streams than this in one second (HTTP/2 "
          "rapid reset; 0 = off)");
// Security (README "Security"). Plaintext is an explicit opt-in.
ABSL_FLAG(bool, insecure, false,
          "allow plaintext: on the client port when --tls_cert is not given, to workers when "
          "--worker_tls_cert is not given (local use only)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of the client-facing port");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle that verifies client certificates (a client showing one it did not sign "
          "is refused)");
ABSL_FLAG(bool, tls_require_client_cert, false,
          "with --tls_ca: every client must show a certificate (mutual TLS)");
ABSL_FLAG(std::string, worker_tls_cert, "", "PEM client certificate the router shows workers");
ABSL_FLAG(std::string, worker_tls_key, "", "PEM private key of --worker_tls_cert");
ABSL_FLAG(std::string, worker_tls_ca, "", "PEM CA bundle that verifies the workers' certificates");
ABSL_FLAG(std::string, worker_tls_server_name, "",
          "name to verify worker certificates against instead of each worker address's host");
ABSL_FLAG(std::string, api_keys_file, "",
          "file with one API key per line; clients must send 'authorization: Bearer <key>'");

namespace pkv::router {
namespace {

// TLS files and API keys; plaintext only with --insecure (README "Security").
absl::Status SecurityFromFlags(RouterOptions& o) {
  o.client_tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                  absl::GetFlag(FLAGS_tls_ca)};
  o.worker_tls = {absl::GetFlag(FLAGS_worker_tls_cert), absl::GetFlag(FLAGS_worker_tls_key),
                  absl::GetFlag(FLAGS_worker_tls_ca)};
  o.require_client_cert = absl::GetFlag(FLAGS_tls_require_client_cert);
  o.worker_tls_server_name = absl::GetFlag(FLAGS_worker_tls_server_name);
  o.api_keys_file = absl::GetFlag(FLAGS_api_keys_file);
  if (absl::GetFlag(FLAGS_insecure)) return absl::OkStatus();
  if (o.client_tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "the client port needs TLS (--tls_cert and --tls_key), or --insecure to serve plaintext "
        "(local use only)");
  }
  if (!o.worker_tls.any()) {
    return absl::InvalidArgumentError(
        "worker connections need mutual TLS (--worker_tls_cert, --worker_tls_key, "
        "--worker_tls_ca), or --insecure to use plaintext (local use only)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RouterProcessOptions> RouterProcessOptionsFromFlags() {
  RouterProcessOptions p;
  RouterOptions& o = p.router;
  o.listen = absl::GetFlag(FLAGS_listen);
  absl::StatusOr<std::vector<std::string>> workers = ParseWorkerList(absl::GetFlag(FLAGS_workers));
  if (!workers.ok()) return workers.status();
  o.workers = *std::move(workers);
  o.workers_dns = absl::GetFlag(FLAGS_workers_dns);
  o.dns_interval_ms = absl::GetFlag(FLAGS_dns_interval_ms);
  o.max_workers = absl::GetFlag(FLAGS_max_workers);
  o.max_queue_tokens = absl::GetFlag(FLAGS_max_queue_tokens);
  o.eject_base_ms = absl::GetFlag(FLAGS_eject_base_ms);
  o.eject_max_ms = absl::GetFlag(FLAGS_eject_max_ms);
  o.eject_reset_ms = absl::GetFlag(FLAGS_eject_reset_ms);
  o.max_inflight = absl::GetFlag(FLAGS_max_inflight);
  o.max_queue = absl::GetFlag(FLAGS_max_queue);
  o.queue_timeout_ms = absl::GetFlag(FLAGS_queue_timeout_ms);
  o.retry_pushback_ms = absl::GetFlag(FLAGS_retry_pushback_ms);
  o.health_interval_ms = absl::GetFlag(FLAGS_health_interval_ms);
  o.health_timeout_ms = absl::GetFlag(FLAGS_health_timeout_ms);
  o.unhealthy_threshold = absl::GetFlag(FLAGS_unhealthy_threshold);
  o.load_interval_ms = absl::GetFlag(FLAGS_load_interval_ms);
  o.worker_health_service = absl::GetFlag(FLAGS_worker_health_service);
  o.worker_keepalive_ms = absl::GetFlag(FLAGS_worker_keepalive_ms);
  o.worker_keepalive_timeout_ms = absl::GetFlag(FLAGS_worker_keepalive_timeout_ms);
  o.stall_timeout_ms = absl::GetFlag(FLAGS_stall_timeout_ms);
  o.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  o.retry_backoff_ms = absl::GetFlag(FLAGS_retry_backoff_ms);
  o.retry_backoff_max_ms = absl::GetFlag(FLAGS_retry_backoff_max_ms);
  o.max_migrations = absl::GetFlag(FLAGS_max_migrations);
  o.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  o.prefix_routing = absl::GetFlag(FLAGS_prefix_routing);
  o.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  o.http_listen = absl::GetFlag(FLAGS_http_listen);
  o.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  o.http_threads = absl::GetFlag(FLAGS_http_threads);
  o.http_max_connections = absl::GetFlag(FLAGS_http_max_connections);
  o.http_max_body_bytes = absl::GetFlag(FLAGS_http_max_body_bytes);
  o.http_read_timeout_ms = absl::GetFlag(FLAGS_http_read_timeout_ms);
  o.http_request_timeout_s = absl::GetFlag(FLAGS_http_request_timeout_s);
  absl::Status security = SecurityFromFlags(o);
  if (!security.ok()) return security;
  o.max_metadata_bytes = absl::GetFlag(FLAGS_max_metadata_bytes);
  o.handshake_timeout_ms = absl::GetFlag(FLAGS_handshake_timeout_ms);
  o.client_write_timeout_ms = absl::GetFlag(FLAGS_client_write_timeout_ms);
  o.max_streams_per_connection_s = absl::GetFlag(FLAGS_max_streams_per_connection_s);
  o.max_resets_per_connection_s = absl::GetFlag(FLAGS_max_resets_per_connection_s);
  const int max_stops = absl::GetFlag(FLAGS_max_stop_strings);
  const int max_text = absl::GetFlag(FLAGS_max_prompt_text_bytes);
  if (max_stops < 0 || max_text < 1) {
    return absl::InvalidArgumentError(
        "--max_stop_strings must be >= 0 and --max_prompt_text_bytes >= 1");
  }
  o.limits.max_stop_strings = static_cast<uint32_t>(max_stops);
  o.limits.max_prompt_text_bytes = static_cast<uint32_t>(max_text);
  const int max_prompt = absl::GetFlag(FLAGS_max_prompt_tokens);
  if (max_prompt < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_prompt_tokens must be >= 0, got ", max_prompt));
  }
  o.limits.max_prompt_tokens = static_cast<uint32_t>(max_prompt);
  p.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  p.drain_timeout_s = absl::GetFlag(FLAGS_drain_timeout_s);
  if (p.drain_timeout_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain_timeout_s must be >= 0, got ", p.drain_timeout_s));
  }
  absl::Status valid = ValidateRouterOptions(o);
  if (!valid.ok()) return valid;
  return p;
}

}  // namespace pkv::router
