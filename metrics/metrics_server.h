// Serves a prometheus-cpp Registry as Prometheus text (GET /metrics) over plain HTTP on its own
// port, for the router and the workers.
//
// Why not prometheus-cpp's Exposer: its embedded civetweb starts threads with a fixed 100 KiB
// stack, which glibc refuses once the process has more static TLS than that (libcublasLt alone
// carries ~92 KiB), so a CUDA worker could not serve metrics at all; civetweb also dlopens the
// unversioned libssl.so that slim GPU images lack. A scrape endpoint needs none of that: one
// thread, one connection at a time, short socket timeouts so a stuck client cannot wedge it.
//
// Thread-safety: Start/destructor from one thread; the serving thread only reads the registry,
// whose collection is thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace pkv {

class MetricsServer {
 public:
  // Binds `address` ("host:port"; port 0 picks a free one) and starts serving.
  // UNAVAILABLE naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();  // stops serving and joins the thread

  int port() const { return port_; }

 private:
  MetricsServer(int listen_fd, int port, std::shared_ptr<prometheus::Registry> registry);
  void Serve();
  void HandleConnection(int fd);

  const int listen_fd_;
  const int port_;
  std::shared_ptr<prometheus::Registry> registry_;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace pkv
