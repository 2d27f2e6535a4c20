// One thread that runs callbacks at given times: admission-queue timeouts, retry backoff and
// stream stall checks. Gives gRPC reactors a way to "wait" without blocking a reaction.
//
// Callbacks run on the timer thread, one at a time, outside the internal lock; they must be quick
// and non-blocking (translate, enqueue, start an async op, return). Schedule and Cancel are
// thread-safe and may be called from a callback. Cancel is exact: it returns true iff the
// callback was removed before it started, in which case it never runs; false means it has run or
// is running (or the id is unknown). The destructor stops the thread and drops callbacks that
// have not run (without running them).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv::router {

class TimerThread {
 public:
  using TimerId = uint64_t;

  TimerThread();
  ~TimerThread();
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  // Runs `fn` on the timer thread at `when` (or soon after). Returns an id for Cancel (never 0).
  TimerId Schedule(absl::Time when, std::function<void()> fn);
  TimerId ScheduleAfter(absl::Duration delay, std::function<void()> fn) {
    return Schedule(absl::Now() + delay, std::move(fn));
  }
  // True iff the callback was removed before it ran.
  bool Cancel(TimerId id);

 private:
  void Loop();

  absl::Mutex mu_;
  // Ordered by (due time, id) so equal times run in scheduling order.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<TimerId, absl::Time> due_by_id_ ABSL_GUARDED_BY(mu_);
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pkv::router
