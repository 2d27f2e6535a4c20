// Serves a prometheus-cpp Registry as Prometheus text (GET /metrics) over plain HTTP on its own
// port, for the router and the workers, on the same HTTP stack as the router's API
// (http/http_server.h, Boost.Beast).
//
// Why not prometheus-cpp's Exposer: its embedded civetweb starts threads with a fixed 100 KiB
// stack, which glibc refuses once the process has more static TLS than that (libcublasLt alone
// carries ~92 KiB), so a CUDA worker could not serve metrics at all; civetweb also dlopens the
// unversioned libssl.so that slim GPU images lack. The HTTP server is asynchronous, so a client
// that sends its request one byte at a time never delays another scrape; each connection must
// send its request within kConnectionDeadline, and at most kMaxConnections are open at once (the
// oldest is dropped to make room, so idle connections cannot lock Prometheus out).
//
// Thread-safety: Start/destructor from one thread; the serving thread only reads the registry,
// whose collection is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "http/http_server.h"
#include "prometheus/registry.h"

namespace pkv {

class MetricsServer {
 public:
  static constexpr size_t kMaxConnections = 64;
  static constexpr absl::Duration kConnectionDeadline = absl::Seconds(5);

  // Binds `address` ("host:port"; port 0 picks a free one) and starts serving.
  // UNAVAILABLE naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();  // stops serving and joins the thread

  int port() const { return server_->port(); }

 private:
  explicit MetricsServer(std::unique_ptr<http::HttpServer> server) : server_(std::move(server)) {}

  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace pkv
