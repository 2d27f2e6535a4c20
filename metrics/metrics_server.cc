#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace pkv {
namespace {

constexpr size_t kMaxRequestBytes = 8192;

absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address must be host:port, got '", address, "'"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, address.substr(colon + 1));
}

std::string Response(const char* status, const char* content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  auto hp = SplitHostPort(address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const char* host = hp->first.empty() ? nullptr : hp->first.c_str();
  if (getaddrinfo(host, hp->second.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve metrics address ", address));
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on metrics address ", address, ": ", std::strerror(errno)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  std::unique_ptr<MetricsServer> server(new MetricsServer(fd, port, std::move(registry)));
  if (pipe2(server->wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError("cannot create the metrics server's wake pipe");
  }
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsServer::MetricsServer(int listen_fd, int port,
                             std::shared_ptr<prometheus::Registry> registry)
    : listen_fd_(listen_fd), port_(port), registry_(std::move(registry)) {}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    const char byte = 0;
    (void)!write(wake_pipe_[1], &byte, 1);
    thread_.join();
  }
  close(listen_fd_);
  if (wake_pipe_[0] >= 0) close(wake_pipe_[0]);
  if (wake_pipe_[1] >= 0) close(wake_pipe_[1]);
}

void MetricsServer::Serve() {
  std::vector<Connection> open;
  std::vector<pollfd> fds;
  while (true) {
    // Drop connections past their deadline, then wait for the next event or deadline.
    const absl::Time now = absl::Now();
    absl::Time next_deadline = absl::InfiniteFuture();
    for (size_t i = 0; i < open.size();) {
      if (open[i].deadline <= now) {
        close(open[i].fd);
        open[i] = std::move(open.back());
        open.pop_back();
      } else {
        next_deadline = std::min(next_deadline, open[i].deadline);
        ++i;
      }
    }
    fds.assign({{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}});
    for (const Connection& c : open) {
      fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    }
    const int timeout_ms = next_deadline == absl::InfiniteFuture()
                               ? -1
                               : static_cast<int>(std::clamp<int64_t>(
                                     absl::ToInt64Milliseconds(next_deadline - now) + 1, 1, 60000));
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) break;
    // Serve the ready connections (indices shift when one closes: walk the poll set backwards).
    for (size_t i = fds.size(); i-- > 2;) {
      if (fds[i].revents == 0) continue;
      Connection& c = open[i - 2];
      // Reading, recv itself reports a hang-up or error; writing, they end the connection.
      const bool keep =
          c.out.empty() ? OnReadable(c)
                        : (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) == 0 && OnWritable(c);
      if (!keep) {
        close(c.fd);
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(i - 2));
      }
    }
    if ((fds[0].revents & POLLIN) != 0) {
      const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn >= 0) {
        if (open.size() >= kMaxConnections) {  // make room: the oldest has waited longest
          close(open.front().fd);
          open.erase(open.begin());
        }
        Connection c;
        c.fd = conn;
        c.deadline = absl::Now() + kConnectionDeadline;
        open.push_back(std::move(c));
      }
    }
  }
  for (const Connection& c : open) close(c.fd);
}

bool MetricsServer::OnReadable(Connection& c) {
  char buf[1024];
  const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n > 0) c.in.append(buf, static_cast<size_t>(n));
  const bool complete = c.in.find("\r\n\r\n") != std::string::npos;
  if (!complete && n > 0 && c.in.size() < kMaxRequestBytes) return true;  // more to come
  if (c.in.empty()) return false;  // closed without a request
  c.out = Answer(c.in);
  return OnWritable(c);
}

bool MetricsServer::OnWritable(Connection& c) {
  while (c.written < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
    if (n > 0) {
      c.written += static_cast<size_t>(n);
    } else {
      return n < 0 && (errno == EAGAIN || errno == EINTR);  // wait for room, or give up
    }
  }
  return false;  // all sent: close (Connection: close)
}

std::string MetricsServer::Answer(const std::string& request) const {
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  // "GET /metrics HTTP/1.1", query strings allowed.
  const bool is_get = line.rfind("GET ", 0) == 0;
  const std::string target = is_get ? line.substr(4, line.find(' ', 4) - 4) : "";
  const std::string path = target.substr(0, target.find('?'));
  if (!is_get) return Response("405 Method Not Allowed", "text/plain", "only GET is served\n");
  if (path == "/metrics") {
    const std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
    return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body);
  }
  return Response("404 Not Found", "text/plain", "metrics are served at /metrics\n");
}

}  // namespace pkv
