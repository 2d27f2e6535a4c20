#include "bench/serve/prometheus_scrape.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pkv::serve_bench {
namespace {

absl::StatusOr<int> Connect(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", host_port, "' is not host:port"));
  }
  const std::string host = host_port.substr(0, colon);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
  return fd;
}

}  // namespace

absl::StatusOr<std::string> FetchMetrics(const std::string& host_port) {
  absl::StatusOr<int> fd = Connect(host_port);
  if (!fd.ok()) return fd.status();
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", host_port, "\r\nConnection: close\r\n\r\n");
  std::string response;
  if (write(*fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[65536];
    ssize_t n;
    while ((n = read(*fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  }
  close(*fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("no HTTP response from ", host_port, "/metrics"));
  }
  const std::string status_line = response.substr(0, response.find('\r'));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::UnavailableError(absl::StrCat(host_port, "/metrics: ", status_line));
  }
  return response.substr(body + 4);
}

absl::StatusOr<double> SumMetric(absl::string_view exposition, absl::string_view name) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line[0] == '#' || !absl::ConsumePrefix(&line, name)) continue;
    if (line.empty() || (line[0] != '{' && line[0] != ' ')) continue;  // a longer name
    if (line[0] == '{') {
      const size_t close = line.find("} ");  // label values here never hold "} "
      if (close == absl::string_view::npos) continue;
      line.remove_prefix(close + 1);
    }
    line = absl::StripAsciiWhitespace(line);
    const absl::string_view value = line.substr(0, line.find(' '));  // drop a timestamp
    double v = 0;
    if (!absl::SimpleAtod(value, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": bad value '", value, "'"));
    }
    sum += v;
  }
  return sum;
}

}  // namespace pkv::serve_bench
