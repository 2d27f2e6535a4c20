// Per-connection shedding on the client-facing port (RELIABILITY S5, CVE-2023-44487 "rapid
// reset"). gRPC 1.51 bounds the streams open on a connection but not how fast a client opens and
// resets them, and the work of a flood of short-lived streams starves the router's threads, whose
// late timers then misjudge healthy workers. The guard counts, per client connection, the streams
// opened (Generate, Abort, GetModelInfo calls) and the streams the client reset (cancelled before
// their end, not by their deadline) in one-second windows. Past a limit the connection is refused
// further streams and closed: its socket is shut down, which gRPC sees as the peer going away, so
// the connection's other streams end too and no other connection is touched.
//
// A connection is known by its peer address as gRPC reports it ("ipv4:127.0.0.1:53412",
// "ipv6:[::1]:53412"); the socket is found among this process's descriptors by that address and
// the listening port, and its address is checked again just before the shutdown. Peers that are
// not TCP (a unix socket) are not counted. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv::router {

struct ConnectionLimits {
  int max_streams_per_second = 2000;  // 0 = unlimited
  int max_resets_per_second = 200;    // 0 = unlimited
};

class ConnectionGuard {
 public:
  // `listen_port`: the client-facing port (0 until known: set_listen_port), which tells the
  // client connections apart from the router's own connections to workers.
  explicit ConnectionGuard(ConnectionLimits limits) : limits_(limits) {}
  void set_listen_port(int port) { listen_port_.store(port); }

  // A stream starts on `peer`'s connection; false when that connection is over its limits (the
  // caller refuses the stream; the connection is being closed).
  bool AdmitStream(const std::string& peer);
  // The client reset a stream of `peer`'s connection.
  void RecordReset(const std::string& peer);

  // Connections closed for exceeding a limit, since start.
  int64_t closed_connections() const;

 private:
  struct Window {
    absl::Time start;
    int streams = 0;
    int resets = 0;
    bool closed = false;
    absl::Time last_seen;
  };
  // Counts one event in `peer`'s current window; true when this crossed a limit for the first
  // time (the caller then closes the connection, unlocked).
  bool CountLocked(const std::string& peer, bool reset, bool* over)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Close(const std::string& peer, const char* what);
  void ForgetIdleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionLimits limits_;
  std::atomic<int> listen_port_{0};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Window> windows_ ABSL_GUARDED_BY(mu_);
  int64_t events_since_sweep_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t closed_ ABSL_GUARDED_BY(mu_) = 0;
};

// Shuts down (SHUT_RDWR) this process's TCP socket whose local port is `local_port` and whose peer
// is `peer` in gRPC's notation. False when no such socket is open (already closed) or `peer` is not
// a TCP address. Exposed for tests.
bool ShutdownPeerSocket(int local_port, const std::string& peer);

}  // namespace pkv::router
