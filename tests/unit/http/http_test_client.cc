#include "tests/unit/http/http_test_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/harness/loopback.h"

namespace pkv::http::testing {
namespace {

int StatusOf(absl::string_view head) {
  // "HTTP/1.1 200 OK"
  const std::vector<absl::string_view> parts = absl::StrSplit(head, absl::MaxSplits(' ', 2));
  int status = -1;
  if (parts.size() < 2 || !absl::StartsWith(parts[0], "HTTP/") ||
      !absl::SimpleAtoi(parts[1], &status)) {
    return -1;
  }
  return status;
}

}  // namespace

std::string RawResponse::Header(absl::string_view name) const {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon != absl::string_view::npos && absl::EqualsIgnoreCase(line.substr(0, colon), name)) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

RawClient::RawClient(int port) : fd_(pkv::testing::ConnectLoopback(port)) {}

RawClient::~RawClient() { Close(); }

void RawClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool RawClient::Send(absl::string_view bytes) {
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return fd_ >= 0;
}

bool RawClient::Fill(absl::Time deadline, bool* eof) {
  *eof = false;
  if (fd_ < 0) return *eof = true, false;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return false;
  pollfd p{fd_, POLLIN, 0};
  const int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
  if (ready <= 0) return false;
  char chunk[16384];
  const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) return *eof = true, false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

RawResponse RawClient::Read(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  RawResponse out;
  bool eof = false;
  size_t end = 0;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(deadline, &eof) && (eof || absl::Now() >= deadline)) return out;
  }
  out.head = buffer_.substr(0, end);
  size_t length = 0;
  const std::string content_length = out.Header("content-length");
  const bool has_length = absl::SimpleAtoi(content_length, &length);
  const size_t body_start = end + 4;
  while (has_length ? buffer_.size() < body_start + length : !eof) {
    if (!Fill(deadline, &eof) && (eof || absl::Now() >= deadline)) break;
  }
  if (has_length && buffer_.size() < body_start + length) return out;
  if (!has_length) length = buffer_.size() - body_start;
  out.body = buffer_.substr(body_start, length);
  buffer_.erase(0, body_start + length);
  out.status = StatusOf(out.head);
  return out;
}

bool RawClient::WaitFor(absl::string_view needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  bool eof = false;
  while (!absl::StrContains(buffer_, needle)) {
    if (!Fill(deadline, &eof) && (eof || absl::Now() >= deadline)) return false;
  }
  return true;
}

bool RawClient::WaitClosed(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  bool eof = false;
  while (absl::Now() < deadline) {
    if (!Fill(deadline, &eof) && eof) return true;
    buffer_.clear();
  }
  return false;
}

CurlResult Curl(const std::string& args) {
  CurlResult out;
  const std::string command = absl::StrCat("curl -sS -i --max-time 10 ", args, " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::string text;
  char chunk[16384];
  size_t n = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) text.append(chunk, n);
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const size_t end = text.find("\r\n\r\n");
  if (end == std::string::npos) return out;
  out.head = text.substr(0, end);
  out.body = text.substr(end + 4);
  out.status = StatusOf(out.head);
  return out;
}

}  // namespace pkv::http::testing
