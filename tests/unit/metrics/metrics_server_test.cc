// MetricsServer over real loopback sockets: scrapes are answered while other clients drip their
// requests a byte at a time or hold connections open, and each connection ends by its deadline.
#include "metrics/metrics_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "tests/harness/loopback.h"

namespace pkv {
namespace {

int Connect(int port) {
  const int fd = pkv::testing::ConnectLoopback(port);
  EXPECT_GE(fd, 0);
  timeval tv{10, 0};  // a hang detector for the test itself
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string Get(int port, const std::string& path) {
  const int fd = Connect(port);
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string answer = ReadAll(fd);
  close(fd);
  return answer;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter()
        .Name("pkv_test_total")
        .Help("a test counter")
        .Register(*registry_)
        .Add({})
        .Increment(3);
    auto server = MetricsServer::Start("127.0.0.1:0", registry_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsServerTest, ServesMetricsAndRefusesTheRest) {
  const std::string ok = Get(server_->port(), "/metrics?x=1");
  EXPECT_NE(ok.find("HTTP/1.1 200 OK"), std::string::npos) << ok;
  EXPECT_NE(ok.find("pkv_test_total 3"), std::string::npos) << ok;
  EXPECT_NE(Get(server_->port(), "/other").find("404"), std::string::npos);
  const int fd = Connect(server_->port());
  const std::string post = "POST /metrics HTTP/1.1\r\n\r\n";
  send(fd, post.data(), post.size(), MSG_NOSIGNAL);
  EXPECT_NE(ReadAll(fd).find("405"), std::string::npos);
  close(fd);
}

// Issue: one client sending a byte every 1.5 s blocked every scrape. Now scrapes are answered at
// once while several such clients drip, and the drippers are cut off at the deadline.
TEST_F(MetricsServerTest, DrippingClientsNeitherBlockScrapesNorStayForever) {
  constexpr int kDrippers = 3;
  std::vector<int> drippers;
  for (int i = 0; i < kDrippers; ++i) drippers.push_back(Connect(server_->port()));
  const absl::Time start = absl::Now();
  std::thread drip([&] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: slow\r\n\r\n";
    for (size_t b = 0; b < request.size() && absl::Now() - start < absl::Seconds(8); ++b) {
      for (int fd : drippers) send(fd, &request[b], 1, MSG_NOSIGNAL);
      absl::SleepFor(absl::Milliseconds(500));
    }
  });
  for (int i = 0; i < 5; ++i) {
    const absl::Time t0 = absl::Now();
    const std::string answer = Get(server_->port(), "/metrics");
    EXPECT_NE(answer.find("pkv_test_total 3"), std::string::npos) << "scrape " << i;
    // Generous for a loaded machine, and far below the drippers' deadline.
    EXPECT_LT(absl::Now() - t0, MetricsServer::kConnectionDeadline / 2) << "scrape " << i;
    absl::SleepFor(absl::Milliseconds(200));
  }
  // Each dripper is closed without an answer once its connection deadline passed.
  for (int fd : drippers) {
    const std::string got = ReadAll(fd);
    EXPECT_EQ(got.find("200 OK"), std::string::npos);
    close(fd);
  }
  const absl::Duration cut = absl::Now() - start;
  EXPECT_GE(cut, MetricsServer::kConnectionDeadline - absl::Milliseconds(100));
  EXPECT_LT(cut, absl::Seconds(8)) << "the drippers outlived their deadline";
  drip.join();
}

TEST_F(MetricsServerTest, IdleConnectionsBeyondTheBoundDropTheOldest) {
  std::vector<int> idle;
  for (size_t i = 0; i < MetricsServer::kMaxConnections + 4; ++i) {
    idle.push_back(Connect(server_->port()));
  }
  const std::string answer = Get(server_->port(), "/metrics");
  EXPECT_NE(answer.find("pkv_test_total 3"), std::string::npos);
  // The first connection was dropped to make room: EOF without an answer (not a timeout).
  char byte = 0;
  EXPECT_EQ(recv(idle.front(), &byte, 1, 0), 0);
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace pkv
