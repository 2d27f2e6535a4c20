// The HTTP/1.1 server of the router's OpenAI-compatible API and of every /metrics endpoint, on
// Boost.Beast (asio). Why Beast (docs/http.md): it is asynchronous, so a connection costs no
// thread and a client that sends one byte a second, or never reads its answer, holds nothing but
// its own socket; it does TLS through asio's OpenSSL stream with the same PEM files as gRPC; and it
// is header-only in Debian's libboost-dev, so nothing new is linked into the binaries.
//
// Limits, each a clear answer rather than a hang:
//   - a request (headers and body) must arrive within read_timeout of the connection being ready
//     for it: else 408 and the connection closes (a keep-alive connection that sent nothing is just
//     closed); the TLS handshake has the same deadline;
//   - headers over max_header_bytes: 431; a body over max_body_bytes: 413; malformed: 400;
//   - one write to the client outstanding for write_timeout, or more than max_pending_write_bytes
//     of output queued and unread: the connection is closed and the exchange's on-gone runs;
//   - at most max_connections open connections: more are closed as soon as they are accepted
//     (or, with evict_oldest_at_limit, the oldest open one is closed to make room).
// Keep-alive is honoured; a client that disconnects while its request is being answered is noticed
// at once (the server keeps reading the socket while the answer is pending).
//
// Thread-safety: Start/Stop/destructor from one control thread; handlers run on the server's
// threads (options.threads) and must not block.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "http/exchange.h"

namespace pkv::http {

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

struct HttpServerOptions {
  std::string listen = "127.0.0.1:8080";  // host:port; port 0 picks a free one
  TlsFiles tls;                           // cert_file + key_file: HTTPS; empty: plain HTTP
  int threads = 2;
  int max_connections = 1024;
  // At max_connections: close the oldest connection to make room (a scrape endpoint, which idle
  // connections must not lock out) instead of refusing the new one.
  bool evict_oldest_at_limit = false;
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(30);
  size_t max_pending_write_bytes = 8 << 20;
};

class HttpServer {
 public:
  // Binds and starts serving. INVALID_ARGUMENT for bad options or TLS files, UNAVAILABLE naming the
  // address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           Handler handler);
  ~HttpServer();  // Stop()

  int port() const;
  // Stops accepting, closes every connection (exchanges still open see on-gone), joins the
  // threads. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The canonical reason phrase of a status code ("Not Found"), for messages.
std::string_view StatusReason(int status);

}  // namespace pkv::http
