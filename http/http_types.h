// The request and response values the HTTP server (http/http_server.h) hands to its handler. Plain
// value types, independent of the HTTP library underneath.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pkv::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // "/v1/models?x=1": the request-target as sent
  std::string path;    // target without "?query"
  Headers headers;     // names lower-cased, in arrival order
  std::string body;    // complete (the server reads it whole, within its size limit)
  std::string peer;    // "127.0.0.1:4242"

  // The first header named `lower_name` (lower-case), or nullptr.
  const std::string* Header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers) {
      if (name == lower_name) return &value;
    }
    return nullptr;
  }
};

struct Response {
  int status = 200;
  Headers headers;  // e.g. {"content-type", "application/json"}; Content-Length is added
  std::string body;
};

}  // namespace pkv::http
