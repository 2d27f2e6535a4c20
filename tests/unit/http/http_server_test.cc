// HttpServer over real loopback connections: plain requests and keep-alive (raw sockets and
// curl), request bodies (Content-Length and chunked), every limit's answer (413, 431, 400, 408),
// slow clients not blocking others, streamed (chunked) answers read back by curl, clients that
// leave or never read (on-gone), max_connections, Stop with connections open, and HTTPS.
// Timing bounds are generous (a loaded 2-core machine); each test takes a few seconds at most.
#include "http/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/json.h"
#include "gtest/gtest.h"
#include "tests/unit/http/http_server_fixture.h"
#include "tests/unit/http/http_test_client.h"

namespace pkv::http {
namespace {

using testing::BinaryBody;
using testing::Curl;
using testing::CurlResult;
using testing::ErrorMessage;
using testing::Get;
using testing::HttpServerTest;
using testing::kWait;
using testing::RawClient;
using testing::RawResponse;

TEST_F(HttpServerTest, GetIsAnswered) {
  Start();
  const CurlResult r = Curl(Url("/hello?x=1"));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /hello 0");
  ASSERT_EQ(requests().size(), 1u);
  const Request request = requests()[0];
  EXPECT_EQ(request.target, "/hello?x=1");
  ASSERT_NE(request.Header("host"), nullptr);
  EXPECT_EQ(*request.Header("host"), absl::StrCat("127.0.0.1:", port()));
  EXPECT_TRUE(absl::StartsWith(request.peer, "127.0.0.1:")) << request.peer;
}

TEST_F(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  Start();
  RawClient client(port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(Get("/one")));
  const RawResponse first = client.Read(kWait);
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "GET /one 0");
  ASSERT_TRUE(client.Send(Get("/two")));
  const RawResponse second = client.Read(kWait);
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.body, "GET /two 0");
  const std::vector<Request> seen = requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].peer, seen[1].peer);  // one connection
}

TEST_F(HttpServerTest, PipelinedRequestsAreBothAnswered) {
  Start();
  RawClient client(port());
  ASSERT_TRUE(client.Send(absl::StrCat(Get("/one"), Get("/two"))));
  EXPECT_EQ(client.Read(kWait).body, "GET /one 0");
  EXPECT_EQ(client.Read(kWait).body, "GET /two 0");
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosedAfterReadTimeout) {
  HttpServerOptions options = Options();
  options.read_timeout = absl::Seconds(1);
  Start(options);
  RawClient client(port());
  ASSERT_TRUE(client.Send(Get("/one")));
  ASSERT_EQ(client.Read(kWait).status, 200);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(client.WaitClosed(kWait));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(800));
}

TEST_F(HttpServerTest, ContentLengthBodyArrivesWhole) {
  Start();
  const std::string body = BinaryBody(300 << 10);
  RawClient client(port());
  ASSERT_TRUE(client.Send(absl::StrCat(
      "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: ", body.size(), "\r\n\r\n")));
  // In pieces, as a network delivers it.
  for (size_t at = 0; at < body.size(); at += 70000) {
    ASSERT_TRUE(client.Send(absl::string_view(body).substr(at, 70000)));
  }
  EXPECT_EQ(client.Read(kWait).body, absl::StrCat("POST /upload ", body.size()));
  ASSERT_EQ(requests().size(), 1u);
  EXPECT_TRUE(requests()[0].body == body);
}

TEST_F(HttpServerTest, ChunkedBodyArrivesWhole) {
  Start();
  RawClient client(port());
  ASSERT_TRUE(client.Send(
      "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"));
  ASSERT_TRUE(client.Send("7;ext=1\r\n, world\r\n"));
  ASSERT_TRUE(client.Send("0\r\n\r\n"));
  EXPECT_EQ(client.Read(kWait).body, "POST /c 12");
  ASSERT_EQ(requests().size(), 1u);
  EXPECT_EQ(requests()[0].body, "hello, world");

  // curl's own chunked encoder, with a large binary body.
  char dir[] = "/tmp/pkv_http_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = absl::StrCat(dir, "/body.bin");
  const std::string body = BinaryBody(200 << 10);
  std::ofstream(path, std::ios::binary) << body;
  const CurlResult r = Curl(
      absl::StrCat("-H 'Transfer-Encoding: chunked' --data-binary @", path, " ", Url("/curl")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, absl::StrCat("POST /curl ", body.size()));
  ASSERT_EQ(requests().size(), 2u);
  EXPECT_TRUE(requests()[1].body == body);
  std::remove(path.c_str());
  rmdir(dir);
}

TEST_F(HttpServerTest, BodyOverLimitIs413WithJsonError) {
  HttpServerOptions options = Options();
  options.max_body_bytes = 1000;
  Start(options);
  {
    RawClient client(port());
    ASSERT_TRUE(client.Send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n" +
                            std::string(5000, 'x')));
    const RawResponse r = client.Read(kWait);
    EXPECT_EQ(r.status, 413);
    EXPECT_TRUE(absl::StartsWith(r.Header("content-type"), "application/json"));
    EXPECT_TRUE(absl::StrContains(ErrorMessage(r.body), "1000")) << r.body;
    EXPECT_TRUE(client.WaitClosed(kWait));
  }
  {
    RawClient client(port());  // chunked: the limit counts the decoded body
    ASSERT_TRUE(client.Send("POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
    for (int i = 0; i < 3 && client.Send("200\r\n" + std::string(512, 'y') + "\r\n"); ++i) {
    }
    const RawResponse r = client.Read(kWait);
    EXPECT_EQ(r.status, 413);
    EXPECT_TRUE(absl::StrContains(ErrorMessage(r.body), "1000")) << r.body;
  }
  {
    RawClient client(port());  // exactly the limit is fine
    ASSERT_TRUE(client.Send("POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n" +
                            std::string(1000, 'x')));
    EXPECT_EQ(client.Read(kWait).body, "POST /ok 1000");
  }
  EXPECT_EQ(requests().size(), 1u);  // the refused requests never reached the handler
}

TEST_F(HttpServerTest, HeadersOverLimitAre431) {
  HttpServerOptions options = Options();
  options.max_header_bytes = 1024;
  Start(options);
  RawClient client(port());
  ASSERT_TRUE(client.Send(
      absl::StrCat("GET / HTTP/1.1\r\nHost: t\r\nX-Big: ", std::string(4000, 'a'), "\r\n\r\n")));
  const RawResponse r = client.Read(kWait);
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(absl::StrContains(ErrorMessage(r.body), "1024")) << r.body;
  EXPECT_TRUE(requests().empty());
}

TEST_F(HttpServerTest, MalformedRequestLineIs400) {
  Start();
  for (const char* bad : {"THIS IS NOT HTTP\r\n\r\n", "GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n",
                          "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
                          "POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"}) {
    RawClient client(port());
    ASSERT_TRUE(client.Send(bad));
    const RawResponse r = client.Read(kWait);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(ErrorMessage(r.body).find("malformed"), std::string::npos) << r.body;
    EXPECT_TRUE(client.WaitClosed(kWait)) << bad;
  }
  EXPECT_TRUE(requests().empty());
}

TEST_F(HttpServerTest, SlowClientTimesOutWithoutBlockingOthers) {
  HttpServerOptions options = Options();
  options.read_timeout = absl::Seconds(1);
  options.threads = 1;  // one thread: a blocked one would stall the other client
  Start(options);
  RawClient slow(port());
  const absl::Time start = absl::Now();
  std::atomic<bool> stop{false};
  std::thread dripper([&] {  // one byte every 200 ms of a request that never ends in time
    const std::string request =
        absl::StrCat("GET /slow HTTP/1.1\r\nX-Slow: ", std::string(200, 'a'));
    for (char c : request) {
      if (stop.load() || !slow.Send(absl::string_view(&c, 1))) return;
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
  RawResponse refused;
  absl::Time refused_at;
  std::thread reader([&] {
    refused = slow.Read(kWait);
    refused_at = absl::Now();
    stop.store(true);
  });
  absl::SleepFor(absl::Milliseconds(300));
  RawClient quick(port());
  ASSERT_TRUE(quick.Send(Get("/quick")));
  EXPECT_EQ(quick.Read(kWait).body, "GET /quick 0");
  const absl::Time answered_at = absl::Now();
  reader.join();
  dripper.join();
  EXPECT_EQ(refused.status, 408);
  EXPECT_TRUE(absl::StrContains(ErrorMessage(refused.body), "in time")) << refused.body;
  // The quick client did not wait for the slow one to be dealt with.
  EXPECT_LT(answered_at, refused_at);
  EXPECT_GE(refused_at - start, absl::Milliseconds(900));
  EXPECT_LT(refused_at - start, absl::Seconds(3));
}

TEST_F(HttpServerTest, HeadersWithoutPromisedBodyAre408) {
  HttpServerOptions options = Options();
  options.read_timeout = absl::Seconds(1);
  Start(options);
  RawClient client(port());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(client.Send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789"));
  const RawResponse r = client.Read(kWait);
  EXPECT_EQ(r.status, 408);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_TRUE(client.WaitClosed(kWait));
  EXPECT_TRUE(requests().empty());
}

}  // namespace
}  // namespace pkv::http
