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

// An infinite duration is refused too: every one of these arms a timer or an RPC deadline.
absl::Status CheckDurationAtLeast(const char* flag, absl::Duration value, absl::Duration min) {
  if (value >= min && value != absl::InfiniteDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be a finite duration >= ", absl::FormatDuration(min),
                   ", got ", absl::FormatDuration(value)));
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

absl::Status ValidateRouterOptions(const RouterOptions& o, int num_in_process_workers) {
  if (o.workers.empty() && o.workers_dns.empty() && num_in_process_workers == 0) {
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
      {"max_queue", {o.max_queue, 0}},
      {"max_queue_tokens", {o.max_queue_tokens, 1}},
      {"max_workers", {o.max_workers, 1}},
      {"unhealthy_threshold", {o.unhealthy_threshold, 1}},
      {"max_attempts", {o.max_attempts, 1}},
      {"max_migrations", {o.max_migrations, 0}},
      {"max_sessions", {o.max_sessions, 1}},
      {"max_request_bytes", {o.max_request_bytes, 1024}},
      {"max_concurrent_streams", {o.max_concurrent_streams, 1}},
      {"max_metadata_bytes", {o.max_metadata_bytes, 1024}},
      {"max_streams_per_connection_per_second", {o.max_streams_per_connection_per_second, 0}},
      {"max_resets_per_connection_per_second", {o.max_resets_per_connection_per_second, 0}},
  };
  for (const auto& [flag, value_min] : checks) {
    absl::Status s = CheckAtLeast(flag, value_min.first, value_min.second);
    if (!s.ok()) return s;
  }
  // Periods and deadlines that drive timers or RPCs must be positive (a zero period would spin);
  // the floors keep a typo like --health_interval=1us from flooding the workers. Zero is
  // meaningful only where the comment in router_options.h says so (no wait, no backoff, never).
  const std::pair<const char*, std::pair<absl::Duration, absl::Duration>> durations[] = {
      {"http_read_timeout", {o.http_read_timeout, absl::Milliseconds(10)}},
      {"http_request_timeout", {o.http_request_timeout, absl::Seconds(1)}},
      {"dns_interval", {o.dns_interval, absl::Milliseconds(100)}},
      {"eject_base", {o.eject_base, absl::Milliseconds(1)}},
      {"eject_max", {o.eject_max, absl::Milliseconds(1)}},
      {"eject_reset", {o.eject_reset, absl::ZeroDuration()}},
      {"queue_timeout", {o.queue_timeout, absl::ZeroDuration()}},
      {"retry_pushback", {o.retry_pushback, absl::ZeroDuration()}},
      {"health_interval", {o.health_interval, absl::Milliseconds(10)}},
      {"health_timeout", {o.health_timeout, absl::Milliseconds(10)}},
      {"load_interval", {o.load_interval, absl::Milliseconds(10)}},
      {"worker_keepalive", {o.worker_keepalive, absl::Milliseconds(100)}},
      {"worker_keepalive_timeout", {o.worker_keepalive_timeout, absl::Milliseconds(100)}},
      {"stall_timeout", {o.stall_timeout, absl::Milliseconds(10)}},
      {"retry_backoff", {o.retry_backoff, absl::ZeroDuration()}},
      {"retry_backoff_max", {o.retry_backoff_max, absl::ZeroDuration()}},
      {"handshake_timeout", {o.handshake_timeout, absl::Milliseconds(100)}},
      {"client_write_timeout", {o.client_write_timeout, absl::ZeroDuration()}},
  };
  for (const auto& [flag, value_min] : durations) {
    absl::Status s = CheckDurationAtLeast(flag, value_min.first, value_min.second);
    if (!s.ok()) return s;
  }
  return ValidateTlsOptions(o);
}

absl::Status ValidateRouterProcessOptions(const RouterProcessOptions& p) {
  absl::Status s = CheckDurationAtLeast("drain_timeout", p.drain_timeout, absl::ZeroDuration());
  if (!s.ok()) return s;
  return ValidateRouterOptions(p.router);
}

}  // namespace pkv::router
