// Serves a prometheus-cpp Registry as Prometheus text (GET /metrics) over plain HTTP on its own
// port, for the router and the workers.
//
// Why not prometheus-cpp's Exposer: its embedded civetweb starts threads with a fixed 100 KiB
// stack, which glibc refuses once the process has more static TLS than that (libcublasLt alone
// carries ~92 KiB), so a CUDA worker could not serve metrics at all; civetweb also dlopens the
// unversioned libssl.so that slim GPU images lack. A scrape endpoint needs none of that: one
// thread polls every open connection (non-blocking sockets), so a client that sends its request
// one byte at a time never delays another scrape; each connection has one overall deadline
// (kConnectionDeadline to send its request and take the answer) and at most kMaxConnections are
// open at once (the oldest is dropped to make room).
//
// Thread-safety: Start/destructor from one thread; the serving thread only reads the registry,
// whose collection is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

  int port() const { return port_; }

 private:
  MetricsServer(int listen_fd, int port, std::shared_ptr<prometheus::Registry> registry);
  struct Connection {
    int fd = -1;
    absl::Time deadline;
    std::string in;   // the request so far
    std::string out;  // the answer, once the request is complete
    size_t written = 0;
  };
  void Serve();
  // Reads what `c` sent, answers a complete request; false once `c` is done (close it).
  bool OnReadable(Connection& c);
  bool OnWritable(Connection& c);
  std::string Answer(const std::string& request) const;

  const int listen_fd_;
  const int port_;
  std::shared_ptr<prometheus::Registry> registry_;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace pkv
