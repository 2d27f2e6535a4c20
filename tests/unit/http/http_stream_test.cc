// HttpServer: streamed answers (StartStream/Write/End as chunked transfer encoding, read back by
// curl), the on-gone callback for a client that leaves mid-stream or never reads (the pending-bytes
// limit and the write timeout), max_connections, Stop with connections open, and HTTPS with a
// throw-away self-signed certificate.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "http/http_server.h"
#include "tests/unit/http/http_server_fixture.h"
#include "tests/unit/http/http_test_client.h"

namespace pkv::http {
namespace {

using testing::BinaryBody;
using testing::Curl;
using testing::CurlResult;
using testing::Get;
using testing::HttpServerTest;
using testing::kWait;
using testing::RawClient;
using testing::RawResponse;

// Counts on-gone calls and says when the first came.
struct GoneProbe {
  std::atomic<int> calls{0};
  absl::Notification first;
  std::function<void()> Callback() {
    return [this] {
      if (calls.fetch_add(1) == 0) first.Notify();
    };
  }
};

TEST_F(HttpServerTest, StreamedAnswerArrivesChunked) {
  std::vector<std::string> pieces;
  for (int i = 0; i < 40; ++i) pieces.push_back(absl::StrCat("data: {\"i\": ", i, "}\n\n"));
  pieces.push_back(BinaryBody(70000));  // larger than any one read
  pieces.push_back("data: [DONE]\n\n");
  handle_ = [this, pieces](std::shared_ptr<Exchange> exchange) {
    exchange->StartStream(200, {{"content-type", "text/event-stream"}});
    Spawn([exchange, pieces] {
      for (const std::string& piece : pieces) {
        exchange->Write(piece);
        exchange->Write("");  // an empty write must not end the chunked body
        absl::SleepFor(absl::Milliseconds(2));
      }
      exchange->End();
    });
  };
  Start();
  const CurlResult r = Curl(absl::StrCat("-N ", Url("/stream")));
  ASSERT_EQ(r.exit_code, 0) << r.head;
  EXPECT_EQ(r.status, 200);
  const std::string head = absl::AsciiStrToLower(r.head);
  EXPECT_TRUE(absl::StrContains(head, "transfer-encoding: chunked")) << r.head;
  EXPECT_TRUE(absl::StrContains(head, "content-type: text/event-stream")) << r.head;
  EXPECT_FALSE(absl::StrContains(head, "content-length")) << r.head;
  EXPECT_TRUE(r.body == absl::StrJoin(pieces, "")) << r.body.size();
}

TEST_F(HttpServerTest, ClientLeavingMidStreamRunsOnGone) {
  GoneProbe probe;
  std::shared_ptr<Exchange> streaming;
  absl::Notification started;
  handle_ = [&](std::shared_ptr<Exchange> exchange) {
    if (exchange->request().path != "/stream") return Echo(std::move(exchange));
    exchange->SetOnGone(probe.Callback());
    exchange->StartStream(200, {{"content-type", "text/event-stream"}});
    exchange->Write("data: first\n\n");
    Hold(exchange);
    streaming = exchange;
    started.Notify();
  };
  Start();
  RawClient client(port());
  ASSERT_TRUE(client.Send(Get("/stream")));
  ASSERT_TRUE(client.WaitFor("data: first", kWait));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  const absl::Time left = absl::Now();
  client.Close();
  ASSERT_TRUE(probe.first.WaitForNotificationWithTimeout(kWait));
  EXPECT_LT(absl::Now() - left, absl::Seconds(2));  // noticed at once, not at the next write

  // Later calls are dropped; the callback does not run again.
  for (int i = 0; i < 100; ++i) streaming->Write("data: late\n\n");
  streaming->End();
  streaming->Respond(Response{200, {}, "late"});
  const CurlResult r = Curl(Url("/after"));  // the server is fine
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /after 0");
  EXPECT_EQ(probe.calls.load(), 1);
}

TEST_F(HttpServerTest, OnGoneSetAfterTheClientLeftRunsAtOnce) {
  absl::Notification arrived;
  std::shared_ptr<Exchange> pending;
  handle_ = [&](std::shared_ptr<Exchange> exchange) {
    Hold(exchange);
    pending = exchange;
    arrived.Notify();
  };
  Start();
  RawClient client(port());
  ASSERT_TRUE(client.Send(Get("/slow-answer")));
  ASSERT_TRUE(arrived.WaitForNotificationWithTimeout(kWait));
  client.Close();
  absl::SleepFor(absl::Milliseconds(300));  // the server notices the close (nothing to call yet)
  GoneProbe probe;
  pending->SetOnGone(probe.Callback());
  EXPECT_TRUE(probe.first.WaitForNotificationWithTimeout(kWait));
  pending->Respond(Response{200, {}, "too late"});
  EXPECT_EQ(probe.calls.load(), 1);
}

// A streaming handler that writes `piece_bytes` pieces until on-gone (or `max_pieces`).
void WriteUntilGone(const std::shared_ptr<Exchange>& exchange, const GoneProbe& probe,
                    size_t piece_bytes, int max_pieces) {
  const std::string piece(piece_bytes, 'z');
  for (int i = 0; i < max_pieces && probe.calls.load() == 0; ++i) {
    exchange->Write(piece);
    if (i % 8 == 0) absl::SleepFor(absl::Milliseconds(1));
  }
}

// A client whose receive window stays small and who never reads.
std::unique_ptr<RawClient> NonReader(int port) {
  auto client = std::make_unique<RawClient>(port);
  const int small = 4096;
  setsockopt(client->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  return client;
}

TEST_F(HttpServerTest, ClientThatNeverReadsHitsThePendingBytesLimit) {
  HttpServerOptions options = Options();
  options.max_pending_write_bytes = 256 << 10;
  options.write_timeout = absl::Seconds(30);  // not what cuts it off here
  options.max_connections = 1;
  GoneProbe probe;
  handle_ = [&](std::shared_ptr<Exchange> exchange) {
    if (exchange->request().path != "/flood") return Echo(std::move(exchange));
    exchange->SetOnGone(probe.Callback());
    exchange->StartStream(200, {{"content-type", "application/octet-stream"}});
    Spawn([exchange, &probe] { WriteUntilGone(exchange, probe, 64 << 10, 4096); });
  };
  Start(options);
  std::unique_ptr<RawClient> client = NonReader(port());
  ASSERT_TRUE(client->Send(Get("/flood")));
  EXPECT_TRUE(probe.first.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(probe.calls.load(), 1);
  // The server closed its end: the only connection slot is free again, although the unread bytes
  // the kernel still holds keep the client's end readable for a while.
  RawClient next(port());
  ASSERT_TRUE(next.Send(Get("/next")));
  EXPECT_EQ(next.Read(kWait).body, "GET /next 0");
}

TEST_F(HttpServerTest, ClientThatNeverReadsHitsTheWriteTimeout) {
  HttpServerOptions options = Options();
  options.max_pending_write_bytes = 256 << 20;  // not what cuts it off here
  options.write_timeout = absl::Seconds(1);
  GoneProbe probe;
  handle_ = [&](std::shared_ptr<Exchange> exchange) {
    exchange->SetOnGone(probe.Callback());
    exchange->StartStream(200, {{"content-type", "application/octet-stream"}});
    // 32 MiB: more than the kernel's socket buffers hold, less than the pending limit.
    Spawn([exchange, &probe] { WriteUntilGone(exchange, probe, 64 << 10, 512); });
  };
  Start(options);
  std::unique_ptr<RawClient> client = NonReader(port());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(client->Send(Get("/flood")));
  EXPECT_TRUE(probe.first.WaitForNotificationWithTimeout(absl::Seconds(8)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(900));
  EXPECT_EQ(probe.calls.load(), 1);
}

TEST_F(HttpServerTest, ConnectionsBeyondTheLimitAreClosed) {
  HttpServerOptions options = Options();
  options.max_connections = 2;
  Start(options);
  auto first = std::make_unique<RawClient>(port());
  RawClient second(port());
  for (RawClient* c : {first.get(), &second}) {
    ASSERT_TRUE(c->Send(Get("/in")));
    ASSERT_EQ(c->Read(kWait).status, 200);
  }
  RawClient third(port());  // the kernel accepts it; the server closes it
  third.Send(Get("/over"));
  EXPECT_TRUE(third.WaitClosed(kWait));
  ASSERT_TRUE(second.Send(Get("/still")));  // the admitted ones are unaffected
  EXPECT_EQ(second.Read(kWait).body, "GET /still 0");

  first.reset();  // a slot frees up once the server has seen the close
  bool answered = false;
  for (const absl::Time deadline = absl::Now() + kWait; !answered && absl::Now() < deadline;) {
    RawClient next(port());
    answered = next.Send(Get("/next")) && next.Read(absl::Milliseconds(500)).status == 200;
  }
  EXPECT_TRUE(answered);
  EXPECT_EQ(requests().size(), 4u);
}

TEST_F(HttpServerTest, StopWithOpenConnectionsReturnsPromptly) {
  GoneProbe probe;
  std::atomic<int> held{0};
  handle_ = [&](std::shared_ptr<Exchange> exchange) {
    if (exchange->request().path == "/echo") return Echo(std::move(exchange));
    // A handler with work in flight: on-gone cancels it and drops the exchange, or (/keep) the
    // cancel completes later and the exchange stays held meanwhile.
    const Exchange* raw = exchange.get();
    const bool keep = exchange->request().path == "/keep";
    exchange->SetOnGone([this, &probe, raw, keep] {
      probe.Callback()();
      if (!keep) Release(raw);
    });
    if (exchange->request().path == "/stream") {
      exchange->StartStream(200, {});
      exchange->Write("data: x\n\n");
    }
    Hold(std::move(exchange));
    held.fetch_add(1);
  };
  Start();
  RawClient idle(port()), partial(port()), kept_alive(port()), pending(port()), stream(port()),
      keep(port());
  ASSERT_TRUE(partial.Send("GET / HTTP/1.1\r\nHo"));
  ASSERT_TRUE(kept_alive.Send(Get("/echo")));
  ASSERT_EQ(kept_alive.Read(kWait).status, 200);
  ASSERT_TRUE(pending.Send(Get("/pending")));
  ASSERT_TRUE(keep.Send(Get("/keep")));
  ASSERT_TRUE(stream.Send(Get("/stream")));
  ASSERT_TRUE(stream.WaitFor("data: x", kWait));
  for (const absl::Time deadline = absl::Now() + kWait; held.load() < 3 && absl::Now() < deadline;)
    absl::SleepFor(absl::Milliseconds(10));

  const absl::Time start = absl::Now();
  server_->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(probe.calls.load(), 3);  // every unfinished exchange saw on-gone
  for (RawClient* c : {&idle, &partial, &kept_alive, &pending, &stream, &keep}) {
    EXPECT_TRUE(c->WaitClosed(kWait));
  }
  RawClient after(port());
  EXPECT_FALSE(after.connected() && after.Send(Get("/echo")) &&
               after.Read(absl::Seconds(1)).status == 200);
}

TEST_F(HttpServerTest, HttpsWithSelfSignedCertificate) {
  char dir[] = "/tmp/pkv_https_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string cert = absl::StrCat(dir, "/cert.pem"), key = absl::StrCat(dir, "/key.pem");
  ASSERT_EQ(std::system(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                                     "/CN=localhost -keyout ",
                                     key, " -out ", cert, " >/dev/null 2>&1")
                            .c_str()),
            0);
  HttpServerOptions options = Options();
  options.read_timeout = absl::Seconds(1);
  options.tls.cert_file = cert;
  options.tls.key_file = key;
  Start(options);

  const CurlResult r = Curl(absl::StrCat("-k ", Url("/secure", "https")));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /secure 0");
  // It is TLS with that certificate: curl refuses it unless told to trust it.
  EXPECT_NE(Curl(Url("/secure", "https")).exit_code, 0);
  EXPECT_EQ(Curl(absl::StrCat("--cacert ", cert, " --resolve localhost:", port(),
                              ":127.0.0.1 https://localhost:", port(), "/ca"))
                .body,
            "GET /ca 0");
  // A request whose body never comes is told 408 over TLS too.
  const CurlResult partial =
      Curl(absl::StrCat("-k -H 'Content-Length: 100' --data abc ", Url("/partial", "https")));
  EXPECT_EQ(partial.status, 408) << partial.head;
  RawClient plain(port());  // plain HTTP to the TLS port gets no answer of the handler's
  plain.Send(Get("/plain"));
  EXPECT_NE(plain.Read(absl::Seconds(3)).status, 200);
  EXPECT_EQ(requests().size(), 2u);
  std::system(absl::StrCat("rm -rf ", dir).c_str());
}

}  // namespace
}  // namespace pkv::http
