// The fixture of the HttpServer tests: a server on 127.0.0.1:0 with a handler each test sets
// (default: answer "<method> <path> <body bytes>"), the requests it saw, exchanges a test keeps and
// writer threads, released in order at the end (Stop, join the writers, drop the exchanges).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/json.h"
#include "gtest/gtest.h"
#include "http/http_server.h"

namespace pkv::http::testing {

inline constexpr absl::Duration kWait = absl::Seconds(5);  // "soon", on a loaded machine

inline std::string Get(absl::string_view path) {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n\r\n");
}

// Every byte value, `n` of them: a body no text handling may alter.
inline std::string BinaryBody(size_t n) {
  std::string body(n, '\0');
  for (size_t i = 0; i < n; ++i) body[i] = static_cast<char>((i * 131 + i / 256) & 0xff);
  return body;
}

// The JSON error body the server answers its own errors with: {"error": {"message", ...}}.
inline std::string ErrorMessage(const std::string& body) {
  absl::StatusOr<JsonValue> json = ParseJson(body);
  if (!json.ok()) return absl::StrCat("<not JSON: ", json.status().message(), ">");
  const JsonValue* error = json->Find("error");
  const JsonValue* message = error == nullptr ? nullptr : error->Find("message");
  if (message == nullptr || !message->is_string()) return "<no error.message>";
  return message->str();
}

class HttpServerTest : public ::testing::Test {
 protected:
  static HttpServerOptions Options() {
    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    options.read_timeout = absl::Seconds(2);
    options.write_timeout = absl::Seconds(2);
    return options;
  }

  // Starts the server with `handle_` (default: answer "<method> <path> <body bytes>").
  void Start(HttpServerOptions options = Options()) {
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start(std::move(options), [this](std::shared_ptr<Exchange> exchange) {
          {
            absl::MutexLock lock(&mu_);
            requests_.push_back(exchange->request());
          }
          handle_(std::move(exchange));
        });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    {
      absl::MutexLock lock(&mu_);
      held_.clear();
    }
    server_.reset();
  }

  static void Echo(std::shared_ptr<Exchange> exchange) {
    const Request& r = exchange->request();
    exchange->Respond(Response{200,
                               {{"content-type", "text/plain"}},
                               absl::StrCat(r.method, " ", r.path, " ", r.body.size())});
  }

  std::vector<Request> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  void Hold(std::shared_ptr<Exchange> exchange) {
    absl::MutexLock lock(&mu_);
    held_.push_back(std::move(exchange));
  }
  // Drops a held exchange (as a handler does once its work is cancelled).
  void Release(const Exchange* exchange) {
    absl::MutexLock lock(&mu_);
    std::erase_if(held_, [exchange](const auto& e) { return e.get() == exchange; });
  }
  // Runs `work` on a thread of its own (handlers must not block), joined at the end of the test.
  void Spawn(std::function<void()> work) {
    absl::MutexLock lock(&mu_);
    threads_.emplace_back(std::move(work));
  }
  std::string Url(absl::string_view path, absl::string_view scheme = "http") const {
    return absl::StrCat(scheme, "://127.0.0.1:", server_->port(), path);
  }
  int port() const { return server_->port(); }

  std::function<void(std::shared_ptr<Exchange>)> handle_ = Echo;
  std::unique_ptr<HttpServer> server_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);  // the tests' writers
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Exchange>> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pkv::http::testing
