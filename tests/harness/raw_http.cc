#include "tests/harness/raw_http.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/harness/loopback.h"

namespace pkv::testing {
namespace {

// Appends what arrives within the remaining time; false on timeout or EOF with nothing new.
bool ReadMore(int fd, absl::Time deadline, std::string* into, bool* eof) {
  const int wait_ms =
      static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) <= 0) return false;
  char buf[65536];
  const ssize_t n = read(fd, buf, sizeof(buf));
  if (n <= 0) {
    *eof = true;
    return false;
  }
  into->append(buf, static_cast<size_t>(n));
  return true;
}

// De-chunks `raw` into `body`; true when the terminal chunk was seen.
bool Dechunk(std::string_view raw, std::string* body) {
  body->clear();
  size_t pos = 0;
  while (true) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string_view::npos) return false;
    const std::string size_hex(raw.substr(pos, eol - pos));
    const size_t size = std::strtoul(size_hex.c_str(), nullptr, 16);
    if (size == 0) return raw.find("\r\n", eol + 2) != std::string_view::npos;
    if (raw.size() < eol + 2 + size + 2) return false;
    body->append(raw.substr(eol + 2, size));
    pos = eol + 2 + size + 2;
  }
}

}  // namespace

std::string RawHttpResponse::Header(std::string_view name) const {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(line.substr(0, colon),
                               absl::string_view(name.data(), name.size()))) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

std::string HttpRequest(std::string_view method, std::string_view path, std::string_view body,
                        std::string_view extra_headers) {
  return absl::StrCat(absl::string_view(method.data(), method.size()), " ",
                      absl::string_view(path.data(), path.size()),
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
                      "Content-Length: ", body.size(), "\r\n",
                      absl::string_view(extra_headers.data(), extra_headers.size()), "\r\n",
                      absl::string_view(body.data(), body.size()));
}

absl::StatusOr<RawHttpResponse> ReadHttpResponse(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string raw;
  bool eof = false;
  size_t head_end;
  while ((head_end = raw.find("\r\n\r\n")) == std::string::npos) {
    if (!ReadMore(fd, deadline, &raw, &eof)) {
      return absl::DeadlineExceededError(absl::StrCat(eof ? "connection closed" : "timeout",
                                                      " before a full head; got '",
                                                      raw.substr(0, 200), "'"));
    }
  }
  RawHttpResponse r;
  r.head = raw.substr(0, head_end);
  const std::vector<std::string> first = absl::StrSplit(r.head.substr(0, r.head.find("\r\n")), ' ');
  if (first.size() < 2 || !absl::SimpleAtoi(first[1], &r.status)) {
    return absl::InternalError(absl::StrCat("bad status line: ", r.head.substr(0, 100)));
  }
  std::string rest = raw.substr(head_end + 4);
  const bool chunked = absl::EqualsIgnoreCase(r.Header("transfer-encoding"), "chunked");
  size_t length = 0;
  const bool has_length = absl::SimpleAtoi(r.Header("content-length"), &length);
  while (true) {
    if (chunked && Dechunk(rest, &r.body)) return r;
    if (has_length && rest.size() >= length) {
      r.body = rest.substr(0, length);
      return r;
    }
    if (!ReadMore(fd, deadline, &rest, &eof)) {
      if (eof && !chunked && !has_length) {
        r.body = rest;
        return r;
      }
      return absl::DeadlineExceededError(absl::StrCat(eof ? "connection closed" : "timeout",
                                                      " before the whole body; status ", r.status));
    }
  }
}

absl::StatusOr<RawHttpResponse> RawHttp(int port, std::string_view bytes, absl::Duration timeout) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  size_t sent = 0;
  while (sent < bytes.size()) {
    // MSG_NOSIGNAL: a server that answers and closes early must not kill the test with SIGPIPE.
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close early (oversized input)
    sent += static_cast<size_t>(n);
  }
  absl::StatusOr<RawHttpResponse> r = ReadHttpResponse(fd, timeout);
  close(fd);
  return r;
}

}  // namespace pkv::testing
