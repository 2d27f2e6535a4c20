// Admission control of the router's front door: at most `max_inflight` Generate streams hold a
// slot; up to `max_queue` more, holding at most `max_queued_tokens` prompt tokens together, wait
// (FIFO) at most `queue_timeout` for one; beyond that a request is rejected at once. Overload is
// answered fast and cheaply (RELIABILITY.md anchor 5), and the queue's memory is bounded both in
// requests and in the prompts they carry.
//
// Never blocks: a queued request gets its answer through a callback, run exactly once, either on
// the thread that releases a slot (granted, OK) or on the timer thread (timed out,
// RESOURCE_EXHAUSTED) — unless CancelWait() removed it first. Callbacks run outside the lock.
// Thread-safe. The TimerThread must outlive this object; destroy this object only when no
// request waits (the router drains first).
#pragma once

#include <cstdint>
#include <functional>
#include <list>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/timer_thread.h"

namespace pkv::router {

class AdmissionController {
 public:
  // OK: the waiter now holds a slot (and must Release it). RESOURCE_EXHAUSTED: it waited
  // queue_timeout without getting one.
  using GrantCallback = std::function<void(absl::Status)>;
  // Called under the lock on every change; must be non-blocking (a gauge Set).
  using ChangeCallback = std::function<void(int inflight, int queued)>;

  enum class Outcome { kAdmitted, kQueued, kRejected };
  struct Result {
    Outcome outcome;
    uint64_t ticket = 0;  // for CancelWait when kQueued
  };

  AdmissionController(int max_inflight, int max_queue, absl::Duration queue_timeout,
                      TimerThread* timers, ChangeCallback on_change = nullptr);
  AdmissionController(const AdmissionController&) = delete;
  AdmissionController& operator=(const AdmissionController&) = delete;

  // kAdmitted: the caller holds a slot now and `on_grant` is dropped. kQueued: `on_grant` runs
  // later exactly once unless CancelWait(ticket) returns true. kRejected: the queue is full.
  // `tokens`: the request's prompt size, counted against max_queued_tokens while it waits.
  Result Acquire(GrantCallback on_grant, int64_t tokens = 0);
  // Default: unbounded (only max_queue applies).
  void set_max_queued_tokens(int64_t max_tokens);
  // True iff the waiter was removed before its callback ran (it then never runs).
  bool CancelWait(uint64_t ticket);
  // Frees a slot; hands it to the oldest waiter, running its callback on this thread.
  void Release();

  int inflight() const;
  int queued() const;
  int64_t queued_tokens() const;

 private:
  struct Waiter {
    uint64_t ticket;
    int64_t tokens;
    GrantCallback on_grant;
    TimerThread::TimerId timer;
  };

  void OnTimeout(uint64_t ticket);
  void NotifyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_inflight_;
  const int max_queue_;
  const absl::Duration queue_timeout_;
  TimerThread* const timers_;  // not owned
  const ChangeCallback on_change_;

  mutable absl::Mutex mu_;
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);  // FIFO, oldest first
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t max_queued_tokens_ ABSL_GUARDED_BY(mu_) = INT64_MAX;
  int64_t queued_tokens_ ABSL_GUARDED_BY(mu_) = 0;  // sum over waiters_
};

}  // namespace pkv::router
