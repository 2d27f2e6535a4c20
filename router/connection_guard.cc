#include "router/connection_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/log.h"

namespace pkv::router {
namespace {

constexpr absl::Duration kWindow = absl::Seconds(1);
// Windows of connections silent this long are forgotten (swept every kSweepEvery events).
constexpr absl::Duration kForgetAfter = absl::Seconds(10);
constexpr int64_t kSweepEvery = 4096;

// "ipv4:127.0.0.1:53412" / "ipv6:[::1]:53412" / "ipv6:%5B::1%5D:53412" -> host and port.
bool ParsePeer(absl::string_view peer, std::string* host, int* port) {
  std::string text = absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}, {"%25", "%"}});
  absl::string_view v(text);
  if (absl::ConsumePrefix(&v, "ipv4:")) {
  } else if (!absl::ConsumePrefix(&v, "ipv6:")) {
    return false;  // unix sockets and the like have no per-connection address
  }
  const size_t colon = v.rfind(':');
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(v.substr(colon + 1), port))
    return false;
  absl::string_view h = v.substr(0, colon);
  absl::ConsumePrefix(&h, "[");
  absl::ConsumeSuffix(&h, "]");
  *host = std::string(h);
  return true;
}

// The address of a socket end as host text and port; IPv4-mapped IPv6 as plain IPv4.
bool Describe(const sockaddr_storage& addr, std::string* host, int* port) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    *port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    }
    *port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *host = text;
  return true;
}

bool Matches(int fd, int local_port, const std::string& host, int port) {
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0) {
    return false;
  }
  std::string local_host, remote_host;
  int lport = 0, rport = 0;
  if (!Describe(local, &local_host, &lport) || !Describe(remote, &remote_host, &rport)) {
    return false;
  }
  // IPv4-mapped peers may be reported either way; compare the canonical text.
  std::string want = host;
  if (absl::StartsWith(want, "::ffff:") && want.find('.') != std::string::npos) {
    want = want.substr(7);
  }
  return lport == local_port && rport == port && remote_host == want;
}

bool IsTcpPeer(absl::string_view peer) {
  return absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:");
}

}  // namespace

bool ShutdownPeerSocket(int local_port, const std::string& peer) {
  std::string host;
  int port = 0;
  if (local_port <= 0 || !ParsePeer(peer, &host, &port)) return false;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool done = false;
  while (dirent* entry = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    // Checked on the descriptor itself right before the shutdown, so a descriptor reused for
    // another connection meanwhile is left alone.
    if (Matches(fd, local_port, host, port)) {
      done = shutdown(fd, SHUT_RDWR) == 0;
      break;
    }
  }
  closedir(dir);
  return done;
}

bool ConnectionGuard::AdmitStream(const std::string& peer) {
  if (!IsTcpPeer(peer)) return true;  // e.g. unix sockets: no per-connection name to judge by
  bool over = false, close = false;
  {
    absl::MutexLock lock(&mu_);
    close = CountLocked(peer, /*reset=*/false, &over);
  }
  if (close) Close(peer, "streams opened");
  return !over;
}

void ConnectionGuard::RecordReset(const std::string& peer) {
  if (!IsTcpPeer(peer)) return;
  bool over = false, close = false;
  {
    absl::MutexLock lock(&mu_);
    close = CountLocked(peer, /*reset=*/true, &over);
  }
  if (close) Close(peer, "streams reset");
}

bool ConnectionGuard::CountLocked(const std::string& peer, bool reset, bool* over) {
  const absl::Time now = absl::Now();
  if (++events_since_sweep_ >= kSweepEvery) {
    events_since_sweep_ = 0;
    ForgetIdleLocked(now);
  }
  Window& w = windows_[peer];
  w.last_seen = now;
  if (w.closed) {
    *over = true;
    return false;  // already being closed
  }
  if (now - w.start >= kWindow) {
    w.start = now;
    w.streams = w.resets = 0;
  }
  (reset ? w.resets : w.streams) += 1;
  *over = (limits_.max_streams_per_second > 0 && w.streams > limits_.max_streams_per_second) ||
          (limits_.max_resets_per_second > 0 && w.resets > limits_.max_resets_per_second);
  if (!*over) return false;
  w.closed = true;
  ++closed_;
  return true;
}

void ConnectionGuard::Close(const std::string& peer, const char* what) {
  const bool shut = ShutdownPeerSocket(listen_port_.load(), peer);
  PKV_LOG(WARNING) << "client connection " << peer << " exceeded its limit of " << what
                   << " per second (--max_streams_per_connection_per_second "
                   << limits_.max_streams_per_second << ", --max_resets_per_connection_per_second "
                   << limits_.max_resets_per_second << "); "
                   << (shut ? "closed" : "refusing its streams (socket not found)");
}

void ConnectionGuard::ForgetIdleLocked(absl::Time now) {
  absl::erase_if(windows_,
                 [now](const auto& entry) { return now - entry.second.last_seen > kForgetAfter; });
}

int64_t ConnectionGuard::closed_connections() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace pkv::router
