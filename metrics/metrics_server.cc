#include "metrics/metrics_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace pkv {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  if (address.rfind(':') == std::string::npos || address.back() == ':') {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address must be host:port, got '", address, "'"));
  }
  http::HttpServerOptions options;
  options.listen = address;
  options.threads = 1;
  options.max_connections = static_cast<int>(kMaxConnections);
  options.evict_oldest_at_limit = true;
  options.max_header_bytes = 8 << 10;
  options.max_body_bytes = 1024;
  options.read_timeout = kConnectionDeadline;
  options.write_timeout = kConnectionDeadline;
  auto serve = [registry](std::shared_ptr<http::Exchange> exchange) {
    const http::Request& r = exchange->request();
    if (r.path != "/metrics") {
      return exchange->Respond(
          {404, {{"content-type", "text/plain"}}, "not found: try /metrics\n"});
    }
    if (r.method != "GET" && r.method != "HEAD") {
      return exchange->Respond({405,
                                {{"content-type", "text/plain"}, {"allow", "GET"}},
                                "method not allowed: GET /metrics\n"});
    }
    exchange->Respond({200,
                       {{"content-type", "text/plain; version=0.0.4"}},
                       prometheus::TextSerializer().Serialize(registry->Collect())});
  };
  absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
      http::HttpServer::Start(std::move(options), std::move(serve));
  if (!server.ok()) return server.status();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(*server)));
}

MetricsServer::~MetricsServer() = default;

}  // namespace pkv
