// The bad-input table for the router's HTTP API (RELIABILITY V, P, S3 over HTTP): real pkv-router
// + pkv-worker on loopback, raw HTTP/1.1 bytes so every malformed, oversized or slow input is sent
// exactly. Each case's status and message are asserted; afterwards the router still serves, the
// worker generated nothing and its KV ledger balances, and the router holds no extra sockets.
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/loopback.h"
#include "tests/harness/raw_http.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kReadTimeoutMs = 1500;
constexpr int kMaxBodyBytes = 4 << 20;

struct Case {
  std::string name;
  std::string bytes;  // the whole request as sent
  int status;
  std::string message;  // expected substring of the body
};

Case Post(std::string name, std::string path, std::string body, int status, std::string message) {
  return Case{std::move(name), HttpRequest("POST", path, body), status, std::move(message)};
}

std::string Messages(int n) {
  std::string out = R"({"max_tokens": 2, "messages": [)";
  for (int i = 0; i < n; ++i)
    absl::StrAppend(&out, i ? "," : "", R"({"role":"user","content":"hi"})");
  return out + "]}";
}

std::vector<Case> Cases() {
  const std::string c = "/v1/completions";
  const std::string chat = "/v1/chat/completions";
  return {
      Post("malformed JSON", c, R"({"prompt": "x",)", 400, "not valid JSON"),
      Post("empty body", c, "", 400, "not valid JSON"),
      Post("not an object", c, "[1, 2]", 400, "must be a JSON object"),
      Post("max_tokens a string", c, R"({"prompt": "x", "max_tokens": "5"})", 400,
           "'max_tokens' must be an integer"),
      Post("temperature out of range", c, R"({"prompt": "x", "temperature": 3})", 400,
           "'temperature' must be in [0, 2]"),
      Post("no prompt", c, R"({"max_tokens": 3})", 400, "'prompt' is required"),
      Post("messages not a list", chat, R"({"messages": "hi"})", 400, "'messages' must be a list"),
      Post("unknown role", chat, R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400,
           "role must be one of"),
      Post(
          "image part", chat,
          R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
          400, "other content types are not supported"),
      Post("unknown model", c, R"({"model": "gpt-17", "prompt": "x"})", 404,
           "'gpt-17' does not exist"),
      Post("unknown path", "/v1/embeddings", R"({"input": "x"})", 404, "no route"),
      Case{"GET on a POST route", HttpRequest("GET", c, ""), 405, "takes POST"},
      Post("10 MB body", c, std::string(10 << 20, ' '), 413, "larger than the limit"),
      Post("10000 messages", chat, Messages(10000), 400, "more than the limit of 4096"),
      Post("invalid UTF-8", c, "{\"prompt\": \"\xff\xfe\"}", 400, "not valid UTF-8"),
      Post("deep nesting", c, std::string(5000, '[') + std::string(5000, ']'), 400,
           "not valid JSON"),
      Post("lone surrogate", c, R"({"prompt": "\ud800"})", 400, "not valid JSON"),
      Post("n = 2", c, R"({"prompt": "x", "n": 2})", 400, "'n' must be 1"),
      Post("tools", chat,
           R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
           400, "'tools' is not supported"),
      Post("token id out of vocabulary", c, R"({"prompt": [5, 999999], "max_tokens": 2})", 400,
           "out of vocabulary"),
      Post("max_tokens beyond the context", c, R"({"prompt": "x", "max_tokens": 100000})", 400,
           "max_context"),
      Post("stop not strings", c, R"({"prompt": "x", "stop": [1]})", 400, "'stop' must be"),
      Post("top_logprobs without logprobs", chat,
           R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400,
           "requires 'logprobs'"),
      Case{"malformed request line", "GARBAGE\r\n\r\n", 400, "malformed HTTP request"},
      Case{"headers over the limit",
           absl::StrCat("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ", std::string(64 << 10, 'a'),
                        "\r\n\r\n"),
           431, "headers are larger than the limit"},
      Case{"headers without the promised body",
           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 408,
           "did not arrive in time"},
  };
}

int OpenFds(pid_t pid) {
  int n = 0;
  if (DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

class HttpBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions o;
    o.num_workers = 1;
    o.http = true;
    o.router_args = {absl::StrCat("--http_read_timeout=", kReadTimeoutMs, "ms"),
                     absl::StrCat("--http_max_body_bytes=", kMaxBodyBytes)};
    absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
    port_ = std::stoi(cluster_->router_http_address().substr(10));
  }
  std::unique_ptr<Cluster> cluster_;
  int port_ = 0;
};

TEST_F(HttpBadInputTest, EveryCaseGetsItsStatusAndAClearMessage) {
  const int fds_before = OpenFds(cluster_->router().pid());
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 20u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<RawHttpResponse> r = RawHttp(port_, c.bytes, absl::Seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, c.status) << r->body;
    EXPECT_THAT(r->body, HasSubstr(c.message));
    EXPECT_THAT(r->body, HasSubstr(R"("error":)"));
  }
  // The router still serves, the worker generated nothing, and no socket stayed open.
  absl::StatusOr<RawHttpResponse> ok =
      RawHttp(port_, HttpRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(ScrapeMetric(cluster_->worker(0).metrics_address(), "pkv_generated_tokens_total"), 2);
  EXPECT_TRUE(WaitWorkerQuiescent(cluster_->worker(0), absl::Seconds(20)).ok());
  EXPECT_TRUE(WaitFor([&] { return OpenFds(cluster_->router().pid()) <= fds_before + 1; },
                      absl::Seconds(10)))
      << OpenFds(cluster_->router().pid()) << " open descriptors, " << fds_before << " before";
}

// A body sent one byte a second gets 408 at the read timeout, and meanwhile another client on its
// own connection is answered at once: a slow sender holds nothing but its own socket.
TEST_F(HttpBadInputTest, SlowSenderTimesOutWithoutBlockingOthers) {
  const int fd = ConnectLoopback(port_);
  ASSERT_GE(fd, 0);
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  const std::string request = HttpRequest("POST", "/v1/completions", body);
  const std::string head = request.substr(0, request.size() - body.size());
  ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  std::thread dribble([&] {
    for (size_t i = 0; i < body.size(); ++i) {
      // The server closed the connection (MSG_NOSIGNAL: no SIGPIPE for that).
      if (send(fd, &body[i], 1, MSG_NOSIGNAL) != 1) return;
      absl::SleepFor(absl::Seconds(1));
    }
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<RawHttpResponse> health =
      RawHttp(port_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", absl::Seconds(10));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(kReadTimeoutMs))
      << "the slow sender delayed another client";
  absl::StatusOr<RawHttpResponse> r = ReadHttpResponse(fd, absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 408);
  EXPECT_THAT(r->body, HasSubstr("did not arrive in time"));
  shutdown(fd, SHUT_RDWR);
  dribble.join();
  close(fd);
}

}  // namespace
}  // namespace pkv::testing
