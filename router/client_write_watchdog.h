// Bounds how long a client may leave the router's responses unread (RELIABILITY.md S3, Envoy's
// stream_idle_timeout rationale). gRPC's flow control stalls a write once the client stops
// reading; without a bound such a stream would hold its admission slot (and, while it generates,
// the worker's KV pages) for as long as the client keeps the connection open.
//
// The owner reports each write (or the final status) it hands to gRPC and each completion. When
// one stays outstanding for `limit`, the watchdog cancels the server call (TryCancel: the client
// gets CANCELLED, the stream's OnCancel/OnDone run, the worker call is cancelled and the worker
// frees the pages). Other streams are unaffected: the decode loop never waits on a client.
//
// Thread-safety: all methods are thread-safe. TryCancel may run gRPC reactions inline, including
// the owner's OnDone, which calls Stop(); the state lock is therefore recursive, and the owner
// must not hold its own lock while calling any method here (the usual rule for gRPC calls).
// Lifetime: the owner calls Stop() in OnDone, before the server context goes away; a timer that
// fires afterwards finds no context and does nothing (its state is shared, not owned by the owner).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "router/timer_thread.h"

namespace pkv::router {

class ClientWriteWatchdog {
 public:
  // `limit` <= 0 disables the watchdog. `on_fire` runs once, just before the cancel (metrics,
  // logging); it must not block or take locks that gRPC reactions take.
  ClientWriteWatchdog(TimerThread* timers, absl::Duration limit, grpc::CallbackServerContext* ctx,
                      std::function<void()> on_fire);
  ~ClientWriteWatchdog() { Stop(); }
  ClientWriteWatchdog(const ClientWriteWatchdog&) = delete;
  ClientWriteWatchdog& operator=(const ClientWriteWatchdog&) = delete;

  // A write or Finish was just handed to gRPC (call before StartWrite / Finish).
  void WriteStarted();
  // OnWriteDone arrived: nothing outstanding until the next WriteStarted.
  void WriteDone();
  // The call is over (OnDone): never touch the context again.
  void Stop();

 private:
  struct State {
    std::recursive_mutex mu;
    grpc::CallbackServerContext* ctx = nullptr;  // null once stopped or fired
    absl::Time outstanding_since = absl::InfiniteFuture();
    TimerThread::TimerId timer = 0;
    std::function<void()> on_fire;
  };
  static void OnTimer(TimerThread* timers, absl::Duration limit,
                      const std::shared_ptr<State>& state);
  static void ArmLocked(TimerThread* timers, absl::Duration limit,
                        const std::shared_ptr<State>& state, absl::Time when);

  TimerThread* const timers_;
  const absl::Duration limit_;
  const std::shared_ptr<State> state_;
};

}  // namespace pkv::router
