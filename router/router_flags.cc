#include "router/router_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

// Every default comes from RouterOptions / RouterProcessOptions (router_options.h,
// router_flags.h), the one place they are kept.
static const pkv::router::RouterProcessOptions kDefaults;
static const pkv::router::RouterOptions& kRouter = kDefaults.router;

ABSL_FLAG(std::string, listen, kRouter.listen, "client-facing gRPC address (host:port)");
ABSL_FLAG(std::string, metrics_listen, kDefaults.metrics_listen,
          "Prometheus /metrics address (host:port), separate from the gRPC port; empty = off");
ABSL_FLAG(std::string, http_listen, kRouter.http_listen,
          "OpenAI-compatible HTTP API address (host:port): /v1/chat/completions, /v1/completions, "
          "/v1/models, /health, /metrics; same TLS (--tls_cert/--tls_key) and API keys as gRPC; "
          "empty = off");
ABSL_FLAG(std::string, served_model_name, kRouter.served_model_name,
          "model name HTTP clients send and /v1/models lists; empty = the workers' model name");
ABSL_FLAG(int, http_threads, kRouter.http_threads, "HTTP I/O threads");
ABSL_FLAG(int, http_max_connections, kRouter.http_max_connections,
          "open HTTP connections, at most");
ABSL_FLAG(int, http_max_body_bytes, kRouter.http_max_body_bytes,
          "largest HTTP request body (413 beyond)");
ABSL_FLAG(absl::Duration, http_read_timeout, kRouter.http_read_timeout,
          "an HTTP request's headers and body must arrive within this (408 otherwise)");
ABSL_FLAG(absl::Duration, http_request_timeout, kRouter.http_request_timeout,
          "the longest one HTTP completion may run");
ABSL_FLAG(std::string, workers, "", "comma-separated host:port list of pkv-worker processes");
ABSL_FLAG(std::string, workers_dns, kRouter.workers_dns,
          "name:port whose DNS A records are workers (a headless Service), re-resolved every "
          "--dns_interval; next to --workers");
ABSL_FLAG(absl::Duration, dns_interval, kRouter.dns_interval,
          "period of --workers_dns re-resolution");
ABSL_FLAG(int, max_workers, kRouter.max_workers,
          "worker slots, static + discovered (bounds memory)");
ABSL_FLAG(int, max_queue_tokens, kRouter.max_queue_tokens,
          "prompt tokens waiting in the admission queue, at most");
ABSL_FLAG(absl::Duration, eject_base, kRouter.eject_base,
          "first ejection of a failing worker (doubles per ejection)");
ABSL_FLAG(absl::Duration, eject_max, kRouter.eject_max, "longest ejection of a failing worker");
ABSL_FLAG(absl::Duration, eject_reset, kRouter.eject_reset,
          "a worker this long without ejection starts a new streak");
ABSL_FLAG(int, max_inflight, kRouter.max_inflight, "Generate streams running at once");
ABSL_FLAG(int, max_queue, kRouter.max_queue,
          "Generate streams waiting for a slot beyond --max_inflight");
ABSL_FLAG(absl::Duration, queue_timeout, kRouter.queue_timeout,
          "longest admission wait before RESOURCE_EXHAUSTED");
ABSL_FLAG(absl::Duration, retry_pushback, kRouter.retry_pushback,
          "grpc-retry-pushback-ms sent with RESOURCE_EXHAUSTED");
ABSL_FLAG(absl::Duration, health_interval, kRouter.health_interval, "worker health-check period");
ABSL_FLAG(absl::Duration, health_timeout, kRouter.health_timeout,
          "deadline of each worker health check");
ABSL_FLAG(int, unhealthy_threshold, kRouter.unhealthy_threshold,
          "consecutive failed checks before a worker is unhealthy");
ABSL_FLAG(absl::Duration, load_interval, kRouter.load_interval, "worker GetLoad polling period");
ABSL_FLAG(std::string, worker_health_service, kRouter.worker_health_service,
          "grpc.health.v1 service name checked on workers (readiness)");
ABSL_FLAG(absl::Duration, worker_keepalive, kRouter.worker_keepalive,
          "keepalive ping period on worker channels");
ABSL_FLAG(absl::Duration, worker_keepalive_timeout, kRouter.worker_keepalive_timeout,
          "keepalive ack timeout on worker channels");
ABSL_FLAG(absl::Duration, stall_timeout, kRouter.stall_timeout,
          "a worker stream silent this long while tokens are expected is a lost worker");
ABSL_FLAG(int, max_attempts, kRouter.max_attempts, "placements per request before its first token");
ABSL_FLAG(absl::Duration, retry_backoff, kRouter.retry_backoff,
          "first retry backoff (doubles per attempt, jittered)");
ABSL_FLAG(absl::Duration, retry_backoff_max, kRouter.retry_backoff_max, "retry backoff cap");
ABSL_FLAG(int, max_migrations, kRouter.max_migrations,
          "mid-stream moves of a stream to another worker when its worker is lost after tokens "
          "were sent (prompt + tokens replayed; 0 = ABORTED instead)");
ABSL_FLAG(int, max_sessions, kRouter.max_sessions, "session-affinity entries kept (LRU)");
ABSL_FLAG(bool, prefix_routing, kRouter.prefix_routing,
          "place a request on the worker that likely caches its prompt prefix (within a load "
          "bound)");
ABSL_FLAG(int, max_prompt_tokens, static_cast<int>(kRouter.limits.max_prompt_tokens),
          "prompt token cap; 0 = the model's max_context - 1");
ABSL_FLAG(int, max_request_bytes, kRouter.max_request_bytes, "largest accepted request message");
ABSL_FLAG(int, max_concurrent_streams, kRouter.max_concurrent_streams,
          "HTTP/2 streams per client connection");
ABSL_FLAG(absl::Duration, drain_timeout, kDefaults.drain_timeout,
          "on SIGTERM/SIGINT, how long in-flight streams may finish");
ABSL_FLAG(int, max_metadata_bytes, kRouter.max_metadata_bytes,
          "largest accepted request metadata (headers) per call");
ABSL_FLAG(absl::Duration, handshake_timeout, kRouter.handshake_timeout,
          "close a client connection that has not completed TLS + HTTP/2 setup by then");
ABSL_FLAG(int, max_stop_strings, static_cast<int>(kRouter.limits.max_stop_strings),
          "stop strings per request");
ABSL_FLAG(int, max_prompt_text_bytes, static_cast<int>(kRouter.limits.max_prompt_text_bytes),
          "bytes of a text prompt");
ABSL_FLAG(absl::Duration, client_write_timeout, kRouter.client_write_timeout,
          "cancel a stream whose client leaves a response unread this long (0 = never)");
ABSL_FLAG(int, max_streams_per_connection_per_second, kRouter.max_streams_per_connection_per_second,
          "close a client connection that opens more streams than this in one second (0 = off)");
ABSL_FLAG(int, max_resets_per_connection_per_second, kRouter.max_resets_per_connection_per_second,
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
  o.dns_interval = absl::GetFlag(FLAGS_dns_interval);
  o.max_workers = absl::GetFlag(FLAGS_max_workers);
  o.max_queue_tokens = absl::GetFlag(FLAGS_max_queue_tokens);
  o.eject_base = absl::GetFlag(FLAGS_eject_base);
  o.eject_max = absl::GetFlag(FLAGS_eject_max);
  o.eject_reset = absl::GetFlag(FLAGS_eject_reset);
  o.max_inflight = absl::GetFlag(FLAGS_max_inflight);
  o.max_queue = absl::GetFlag(FLAGS_max_queue);
  o.queue_timeout = absl::GetFlag(FLAGS_queue_timeout);
  o.retry_pushback = absl::GetFlag(FLAGS_retry_pushback);
  o.health_interval = absl::GetFlag(FLAGS_health_interval);
  o.health_timeout = absl::GetFlag(FLAGS_health_timeout);
  o.unhealthy_threshold = absl::GetFlag(FLAGS_unhealthy_threshold);
  o.load_interval = absl::GetFlag(FLAGS_load_interval);
  o.worker_health_service = absl::GetFlag(FLAGS_worker_health_service);
  o.worker_keepalive = absl::GetFlag(FLAGS_worker_keepalive);
  o.worker_keepalive_timeout = absl::GetFlag(FLAGS_worker_keepalive_timeout);
  o.stall_timeout = absl::GetFlag(FLAGS_stall_timeout);
  o.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  o.retry_backoff = absl::GetFlag(FLAGS_retry_backoff);
  o.retry_backoff_max = absl::GetFlag(FLAGS_retry_backoff_max);
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
  o.http_read_timeout = absl::GetFlag(FLAGS_http_read_timeout);
  o.http_request_timeout = absl::GetFlag(FLAGS_http_request_timeout);
  absl::Status security = SecurityFromFlags(o);
  if (!security.ok()) return security;
  o.max_metadata_bytes = absl::GetFlag(FLAGS_max_metadata_bytes);
  o.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  o.client_write_timeout = absl::GetFlag(FLAGS_client_write_timeout);
  o.max_streams_per_connection_per_second =
      absl::GetFlag(FLAGS_max_streams_per_connection_per_second);
  o.max_resets_per_connection_per_second =
      absl::GetFlag(FLAGS_max_resets_per_connection_per_second);
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
  p.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  absl::Status valid = ValidateRouterProcessOptions(p);
  if (!valid.ok()) return valid;
  return p;
}

}  // namespace pkv::router
