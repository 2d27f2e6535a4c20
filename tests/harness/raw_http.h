// A minimal HTTP/1.1 client over a plain loopback socket, for tests that must send exactly the
// bytes they mean (malformed requests, slow senders, early disconnects) and read the answer as
// sent: status, head, and body (Content-Length or chunked, de-chunked). Not for production use.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pkv::testing {

struct RawHttpResponse {
  int status = 0;
  std::string head;  // status line and headers, as received
  std::string body;  // de-chunked when chunked
  // The value of header `name` (case-insensitive), "" when absent.
  std::string Header(std::string_view name) const;
};

// "POST /path HTTP/1.1" with Host, Content-Type: application/json, Content-Length and `extra`
// header lines ("Name: value\r\n" each) around `body`.
std::string HttpRequest(std::string_view method, std::string_view path, std::string_view body,
                        std::string_view extra_headers = "");

// Reads one response from a connected socket within `timeout`.
absl::StatusOr<RawHttpResponse> ReadHttpResponse(int fd, absl::Duration timeout);

// Connects to 127.0.0.1:port, sends `bytes`, reads one response.
absl::StatusOr<RawHttpResponse> RawHttp(int port, std::string_view bytes,
                                        absl::Duration timeout = absl::Seconds(30));

}  // namespace pkv::testing
