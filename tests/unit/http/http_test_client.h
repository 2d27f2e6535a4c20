// Clients for the HTTP server tests: a raw blocking socket on 127.0.0.1 that sends exactly the
// bytes a test writes (slow, partial, malformed or pipelined requests) and reads plain
// Content-Length responses back, and `curl`, an HTTP implementation nobody here wrote, for what
// must be read as any client reads it (chunked answers, TLS).
//
// Not thread-safe: one RawClient per thread.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pkv::http::testing {

struct RawResponse {
  int status = -1;   // -1: no complete response (timeout, or the connection closed first)
  std::string head;  // status line and headers, up to the blank line
  std::string body;  // Content-Length bytes, or everything until the close without one

  // The first value of header `name` (case-insensitive), or "".
  std::string Header(absl::string_view name) const;
};

class RawClient {
 public:
  explicit RawClient(int port);  // connects; connected() says whether it worked
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Sends all of `bytes` (no SIGPIPE); false when the connection is gone.
  bool Send(absl::string_view bytes);
  // Reads the next response within `timeout`. Bytes after it stay buffered for the next call.
  RawResponse Read(absl::Duration timeout);
  // Reads until the bytes received (and not yet consumed) contain `needle`; false on timeout or
  // close.
  bool WaitFor(absl::string_view needle, absl::Duration timeout);
  // True when the server closes the connection (EOF or reset) within `timeout`; the bytes it sent
  // before that are discarded.
  bool WaitClosed(absl::Duration timeout);
  void Close();

 private:
  // Appends what arrives within `deadline`; false on timeout, EOF or error (*eof set on the last
  // two).
  bool Fill(absl::Time deadline, bool* eof);

  int fd_ = -1;
  std::string buffer_;
};

struct CurlResult {
  int exit_code = -1;  // curl's exit status (0: success)
  int status = -1;     // HTTP status of the (last) response, -1 when none
  std::string head;    // headers as curl received them
  std::string body;    // the body, decoded by curl (chunked transfer encoding undone)
};

// Runs `curl -sS -i <args>` (at most 10 s) and splits its output.
CurlResult Curl(const std::string& args);

}  // namespace pkv::http::testing
