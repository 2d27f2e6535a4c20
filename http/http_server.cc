#include "http/http_server.h"

#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "http/session.h"

namespace pkv::http {

namespace beast = internal::beast;
namespace net = internal::net;
using internal::ServerShared;
using internal::SessionBase;
using internal::tcp;

struct HttpServer::Impl {
  net::io_context io{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::ssl::context> tls;
  std::shared_ptr<ServerShared> shared;
  std::vector<std::thread> threads;
  int port = 0;
  bool stopped = false;

  absl::Mutex mu;  // the open connections, so Stop can close them
  std::vector<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);

  void Accept();
  void Track(const std::shared_ptr<SessionBase>& session);
  void EvictOldest();
};

namespace {

absl::StatusOr<tcp::endpoint> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address '", listen, "' is not host:port"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address '", listen, "': '", host, "' is not an IP address"));
  }
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

absl::Status LoadTls(const TlsFiles& files, net::ssl::context& ctx) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError("HTTPS needs both a certificate and a key file");
  }
  beast::error_code ec;
  ctx.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                  net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                  net::ssl::context::no_tlsv1_1);
  ctx.use_certificate_chain_file(files.cert_file, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("HTTPS certificate ", files.cert_file, ": ", ec.message()));
  ctx.use_private_key_file(files.key_file, net::ssl::context::pem, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("HTTPS key ", files.key_file, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

void HttpServer::Impl::Track(const std::shared_ptr<SessionBase>& session) {
  absl::MutexLock lock(&mu);
  // Forget closed connections now and then, so the list stays as long as the open ones.
  if (sessions.size() >= 64 && (sessions.size() & (sessions.size() - 1)) == 0) {
    std::erase_if(sessions, [](const std::weak_ptr<SessionBase>& s) { return s.expired(); });
  }
  sessions.push_back(session);
}

void HttpServer::Impl::EvictOldest() {
  std::shared_ptr<SessionBase> oldest;
  {
    absl::MutexLock lock(&mu);
    while (!sessions.empty() && oldest == nullptr) {
      oldest = sessions.front().lock();
      sessions.erase(sessions.begin());
    }
  }
  if (oldest != nullptr) net::post(oldest->strand(), [oldest] { oldest->Close(); });
}

void HttpServer::Impl::Accept() {
  acceptor->async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      const bool full = shared->connections.fetch_add(1) >= shared->options.max_connections;
      if (full && shared->options.evict_oldest_at_limit) EvictOldest();
      if (full && !shared->options.evict_oldest_at_limit) {
        shared->connections.fetch_sub(1);
        beast::error_code ignored;
        socket.close(ignored);  // over the limit: refused at once
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        std::shared_ptr<SessionBase> session;
        if (tls.has_value()) {
          session = std::make_shared<internal::Session<net::ssl::stream<tcp::socket>>>(
              net::ssl::stream<tcp::socket>(std::move(socket), *tls), shared);
        } else {
          session = std::make_shared<internal::Session<tcp::socket>>(std::move(socket), shared);
        }
        Track(session);
        net::post(session->strand(), [session] { session->Run(); });
      }
    }
    Accept();
  });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              Handler handler) {
  if (options.threads < 1 || options.max_connections < 1 || options.max_body_bytes == 0 ||
      options.max_header_bytes == 0 || options.read_timeout <= absl::ZeroDuration() ||
      options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("HTTP server: threads, limits and timeouts must be positive");
  }
  absl::StatusOr<tcp::endpoint> endpoint = ParseListen(options.listen);
  if (!endpoint.ok()) return endpoint.status();
  auto impl = std::make_unique<Impl>();
  if (options.tls.any()) {
    impl->tls.emplace(net::ssl::context::tls_server);
    absl::Status loaded = LoadTls(options.tls, *impl->tls);
    if (!loaded.ok()) return loaded;
  }
  beast::error_code ec;
  impl->acceptor.emplace(net::make_strand(impl->io));
  impl->acceptor->open(endpoint->protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(*endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", options.listen, ": ", ec.message()));
  }
  impl->port = impl->acceptor->local_endpoint().port();
  impl->shared = std::make_shared<ServerShared>();
  impl->shared->options = std::move(options);
  impl->shared->handler = std::move(handler);
  impl->work.emplace(net::make_work_guard(impl->io));
  impl->Accept();
  for (int i = 0; i < impl->shared->options.threads; ++i) {
    impl->threads.emplace_back([io = &impl->io] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  net::post(impl_->acceptor->get_executor(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor->close(ignored);
  });
  std::vector<std::weak_ptr<SessionBase>> sessions;
  {
    absl::MutexLock lock(&impl_->mu);
    sessions.swap(impl_->sessions);
  }
  for (const std::weak_ptr<SessionBase>& weak : sessions) {
    if (std::shared_ptr<SessionBase> session = weak.lock()) {
      net::post(session->strand(), [session] { session->Close(); });
    }
  }
  // Closed sessions finish their handlers promptly; whatever still holds one (an exchange kept by
  // a handler) no longer has I/O pending, so run() returns once the work guard is gone.
  impl_->work.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (impl_->shared->connections.load() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  impl_->io.stop();
  for (std::thread& t : impl_->threads) t.join();
}

std::string_view StatusReason(int status) {
  const beast::string_view reason =
      internal::bhttp::obsolete_reason(static_cast<internal::bhttp::status>(status));
  return std::string_view(reason.data(), reason.size());
}

}  // namespace pkv::http
