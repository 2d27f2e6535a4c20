// ConnectionGuard: per-connection stream and reset budgets, and closing the offending connection's
// socket (a real loopback connection) without touching another.
#include "router/connection_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/loopback.h"

namespace pkv::router {
namespace {

// A listening socket on 127.0.0.1 and accepted connections to it: what a server holds.
class Loopback {
 public:
  Loopback() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener_, 8), 0);
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Loopback() { close(listener_); }
  int port() const { return port_; }

  // Connects a client; returns its fd and sets *peer to how gRPC names it at the server.
  int Connect(std::string* peer, int* server_fd) {
    const int fd = pkv::testing::ConnectLoopback(port_);
    EXPECT_GE(fd, 0);
    *server_fd = accept(listener_, nullptr, nullptr);
    *peer = absl::StrCat("ipv4:127.0.0.1:", pkv::testing::LocalPort(fd));
    return fd;
  }

 private:
  int listener_ = -1;
  int port_ = 0;
};

// True when the peer of `fd` closed its end (a read returns EOF or an error).
bool PeerClosed(int fd) {
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char byte = 0;
  return recv(fd, &byte, 1, 0) <= 0 && errno != EAGAIN;
}

TEST(ShutdownPeerSocketTest, ClosesOnlyTheNamedConnection) {
  Loopback server;
  std::string peer_a, peer_b;
  int server_a = -1, server_b = -1;
  const int a = server.Connect(&peer_a, &server_a);
  const int b = server.Connect(&peer_b, &server_b);
  EXPECT_FALSE(ShutdownPeerSocket(server.port(), "ipv4:127.0.0.1:1"));  // no such peer
  EXPECT_FALSE(ShutdownPeerSocket(server.port(), "unix:/tmp/socket"));  // not TCP
  ASSERT_TRUE(ShutdownPeerSocket(server.port(), peer_a));
  EXPECT_TRUE(PeerClosed(a));
  // b is untouched: data still flows both ways.
  ASSERT_EQ(send(server_b, "x", 1, 0), 1);
  char byte = 0;
  EXPECT_EQ(recv(b, &byte, 1, 0), 1);
  // gRPC's IPv6 notation of the same kind of address is understood too.
  EXPECT_TRUE(ShutdownPeerSocket(
      server.port(), "ipv6:%5B::ffff:127.0.0.1%5D:" + peer_b.substr(peer_b.rfind(':') + 1)));
  EXPECT_TRUE(PeerClosed(b));
  for (int fd : {a, b, server_a, server_b}) close(fd);
}

TEST(ConnectionGuardTest, StreamBudgetRefusesAndClosesOnlyTheOffender) {
  Loopback server;
  std::string flooder, polite;
  int server_flooder = -1, server_polite = -1;
  const int f = server.Connect(&flooder, &server_flooder);
  const int p = server.Connect(&polite, &server_polite);
  ConnectionGuard guard(ConnectionLimits{/*max_streams_per_second=*/5,
                                         /*max_resets_per_second=*/3});
  guard.set_listen_port(server.port());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(guard.AdmitStream(flooder)) << i;
  EXPECT_FALSE(guard.AdmitStream(flooder));  // the 6th in one second
  EXPECT_FALSE(guard.AdmitStream(flooder));  // and everything after, while it is being closed
  EXPECT_TRUE(PeerClosed(f));
  EXPECT_TRUE(guard.AdmitStream(polite));
  EXPECT_EQ(guard.closed_connections(), 1);
  for (int fd : {f, p, server_flooder, server_polite}) close(fd);
}

TEST(ConnectionGuardTest, ResetBudgetClosesTheConnection) {
  Loopback server;
  std::string resetter;
  int server_fd = -1;
  const int r = server.Connect(&resetter, &server_fd);
  ConnectionGuard guard(ConnectionLimits{/*max_streams_per_second=*/0,
                                         /*max_resets_per_second=*/3});
  guard.set_listen_port(server.port());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(guard.AdmitStream(resetter));
    guard.RecordReset(resetter);
  }
  EXPECT_TRUE(guard.AdmitStream(resetter)) << "3 resets are within the budget";
  guard.RecordReset(resetter);  // the 4th
  EXPECT_FALSE(guard.AdmitStream(resetter));
  EXPECT_TRUE(PeerClosed(r));
  EXPECT_EQ(guard.closed_connections(), 1);
  close(r);
  close(server_fd);
}

TEST(ConnectionGuardTest, NonTcpPeersAreNotCounted) {
  ConnectionGuard guard(ConnectionLimits{1, 1});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(guard.AdmitStream("unix:/run/pkv.sock"));
    guard.RecordReset("unix:/run/pkv.sock");
  }
  EXPECT_EQ(guard.closed_connections(), 0);
}

TEST(ConnectionGuardTest, ZeroLimitsAreOff) {
  ConnectionGuard guard(ConnectionLimits{0, 0});
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(guard.AdmitStream("ipv4:127.0.0.1:9"));
    guard.RecordReset("ipv4:127.0.0.1:9");
  }
  EXPECT_EQ(guard.closed_connections(), 0);
}

}  // namespace
}  // namespace pkv::router
