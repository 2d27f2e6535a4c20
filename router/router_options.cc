#include "router/router_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "router/dns_discovery.h"

namespace pkv::router {
namespace {

absl::Status CheckAtLeast(const char* flag, int value, int min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be >= ", min, ", got ", value));
}

absl::Status ValidateTlsOptions(const RouterOptions& o) {
  const TlsFiles& c = o.client_tls;
  if (c.cert_file.empty() != c.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!c.ca_file.empty() && c.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_ca (verify client certificates) needs --tls_cert and --tls_key");
  }
  if (o.require_client_cert && c.ca_file.empty()) {
    return absl::InvalidArgumentError("--tls_require_client_cert needs --tls_ca");
  }
  const TlsFiles& w = o.worker_tls;
  if (w.any() && (w.cert_file.empty() || w.key_file.empty() || w.ca_file.empty())) {
    return absl::InvalidArgumentError(
        "mutual TLS to workers needs all of --worker_tls_cert, --worker_tls_key and "
        "--worker_tls_ca");
  }
  if (!o.worker_tls_server_name.empty() && !w.any()) {
    return absl::InvalidArgumentError("--worker_tls_server_name needs --worker_tls_*");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseWorkerList(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    const size_t colon = part.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workers entry '", part, "' is not host:port (port 1..65535)"));
    }
    out.emplace_back(part);
  }
  return out;
}

absl::Status ValidateRouterOptions(const RouterOptions& o) {
  if (o.workers.empty() && o.workers_dns.empty()) {
    return absl::InvalidArgumentError(
        "no workers: give --workers=host:port[,host:port...] (e.g. "
        "--workers=127.0.0.1:50061,127.0.0.1:50062) and/or --workers_dns=name:port");
  }
  if (!o.workers_dns.empty()) {
    absl::StatusOr<DnsTarget> target = ParseDnsTarget(o.workers_dns);
    if (!target.ok()) return target.status();
  }
  const std::pair<const char*, std::pair<int, int>> checks[] = {
      {"max_inflight", {o.max_inflight, 1}},
      {"http_threads", {o.http_threads, 1}},
      {"http_max_connections", {o.http_max_connections, 1}},
      {"http_max_body_bytes", {o.http_max_body_bytes, 1024}},
      {"http_read_timeout_ms", {o.http_read_timeout_ms, 10}},
      {"http_request_timeout_s", {o.http_request_timeout_s, 1}},
      {"max_queue", {o.max_queue, 0}},
      {"max_queue_tokens", {o.max_queue_tokens, 1}},
      {"dns_interval_ms", {o.dns_interval_ms, 100}},
      {"max_workers", {o.max_workers, 1}},
      {"eject_base_ms", {o.eject_base_ms, 1}},
      {"eject_max_ms", {o.eject_max_ms, 1}},
      {"eject_reset_ms", {o.eject_reset_ms, 0}},
      {"queue_timeout_ms", {o.queue_timeout_ms, 0}},
      {"retry_pushback_ms", {o.retry_pushback_ms, 0}},
      {"health_interval_ms", {o.health_interval_ms, 10}},
      {"health_timeout_ms", {o.health_timeout_ms, 10}},
      {"unhealthy_threshold", {o.unhealthy_threshold, 1}},
      {"load_interval_ms", {o.load_interval_ms, 10}},
      {"worker_keepalive_ms", {o.worker_keepalive_ms, 100}},
      {"worker_keepalive_timeout_ms", {o.worker_keepalive_timeout_ms, 100}},
      {"stall_timeout_ms", {o.stall_timeout_ms, 10}},
      {"max_attempts", {o.max_attempts, 1}},
      {"retry_backoff_ms", {o.retry_backoff_ms, 0}},
      {"retry_backoff_max_ms", {o.retry_backoff_max_ms, 0}},
      {"max_migrations", {o.max_migrations, 0}},
      {"max_sessions", {o.max_sessions, 1}},
      {"max_request_bytes", {o.max_request_bytes, 1024}},
      {"max_concurrent_streams", {o.max_concurrent_streams, 1}},
      {"max_metadata_bytes", {o.max_metadata_bytes, 1024}},
      {"handshake_timeout_ms", {o.handshake_timeout_ms, 100}},
      {"client_write_timeout_ms", {o.client_write_timeout_ms, 0}},
      {"max_streams_per_connection_s", {o.max_streams_per_connection_s, 0}},
      {"max_resets_per_connection_s", {o.max_resets_per_connection_s, 0}},
  };
  for (const auto& [flag, value_min] : checks) {
    absl::Status s = CheckAtLeast(flag, value_min.first, value_min.second);
    if (!s.ok()) return s;
  }
  return ValidateTlsOptions(o);
}

}  // namespace pkv::router
