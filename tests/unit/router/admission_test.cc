// AdmissionController and TimerThread: slots, FIFO hand-over, queue bound, timeouts, cancellation;
// timers run in time order, Cancel is exact. No assertion on wall-clock speed: waits are bounded
// only to keep a broken build from hanging.
#include "router/admission.h"

#include <atomic>
#include <random>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "router/backoff.h"
#include "router/timer_thread.h"

namespace pkv::router {
namespace {

constexpr absl::Duration kLong = absl::Seconds(60);  // never reached in a passing run

TEST(TimerThreadTest, RunsInDueOrderAndCancelIsExact) {
  TimerThread timers;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification done;
  const absl::Time base = absl::Now() + absl::Milliseconds(30);
  std::mt19937 rng(4);
  std::vector<int> delays;
  std::vector<TimerThread::TimerId> ids;
  for (int i = 0; i < 20; ++i) {
    delays.push_back(static_cast<int>(rng() % 50));
    ids.push_back(timers.Schedule(base + absl::Milliseconds(delays.back()), [&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
    }));
  }
  // Cancel every third; they must never run.
  for (int i = 0; i < 20; i += 3) EXPECT_TRUE(timers.Cancel(ids[i]));
  timers.Schedule(base + absl::Milliseconds(100), [&] { done.Notify(); });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kLong));
  absl::MutexLock lock(&mu);
  for (int v : order) EXPECT_NE(v % 3, 0) << v;
  EXPECT_EQ(order.size(), 13u);
  for (size_t k = 1; k < order.size(); ++k) {
    EXPECT_LE(delays[order[k - 1]], delays[order[k]]);
  }
  EXPECT_FALSE(timers.Cancel(ids[1]));  // already ran
}

TEST(TimerThreadTest, CallbackMayScheduleAndCancel) {
  TimerThread timers;
  absl::Notification done;
  timers.ScheduleAfter(absl::ZeroDuration(), [&] {
    const auto id = timers.ScheduleAfter(kLong, [] { FAIL() << "cancelled timer ran"; });
    EXPECT_TRUE(timers.Cancel(id));
    timers.ScheduleAfter(absl::Milliseconds(1), [&] { done.Notify(); });
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kLong));
}

TEST(AdmissionTest, AdmitsUpToMaxThenQueuesThenRejects) {
  TimerThread timers;
  AdmissionController admission(2, 1, kLong, &timers);
  EXPECT_EQ(admission.Acquire(nullptr).outcome, AdmissionController::Outcome::kAdmitted);
  EXPECT_EQ(admission.Acquire(nullptr).outcome, AdmissionController::Outcome::kAdmitted);
  std::atomic<int> granted{0};
  auto queued = admission.Acquire([&](absl::Status s) {
    EXPECT_TRUE(s.ok());
    ++granted;
  });
  EXPECT_EQ(queued.outcome, AdmissionController::Outcome::kQueued);
  EXPECT_EQ(admission.Acquire(nullptr).outcome, AdmissionController::Outcome::kRejected);
  EXPECT_EQ(admission.inflight(), 2);
  EXPECT_EQ(admission.queued(), 1);
  admission.Release();  // hands the slot to the waiter, on this thread
  EXPECT_EQ(granted.load(), 1);
  EXPECT_EQ(admission.inflight(), 2);
  EXPECT_EQ(admission.queued(), 0);
  admission.Release();
  admission.Release();
  EXPECT_EQ(admission.inflight(), 0);
}

TEST(AdmissionTest, WaitersAreServedInArrivalOrder) {
  TimerThread timers;
  AdmissionController admission(1, 16, kLong, &timers);
  ASSERT_EQ(admission.Acquire(nullptr).outcome, AdmissionController::Outcome::kAdmitted);
  std::vector<int> order;
  for (int i = 0; i < 10; ++i) {
    admission.Acquire([&order, i](absl::Status s) {
      ASSERT_TRUE(s.ok());
      order.push_back(i);
    });
  }
  for (int i = 0; i < 10; ++i) admission.Release();
  ASSERT_EQ(order.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(order[i], i);
}

TEST(AdmissionTest, QueueTimeoutAnswersResourceExhausted) {
  TimerThread timers;
  AdmissionController admission(1, 4, absl::Milliseconds(20), &timers);
  ASSERT_EQ(admission.Acquire(nullptr).outcome, AdmissionController::Outcome::kAdmitted);
  absl::Notification answered;
  absl::Status got;
  admission.Acquire([&](absl::Status s) {
    got = s;
    answered.Notify();
  });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kLong));
  EXPECT_EQ(got.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(got.message()).find("no slot within 20 ms"), std::string::npos) << got;
  EXPECT_EQ(admission.queued(), 0);
  admission.Release();  // the timed-out waiter must not have taken the slot
  EXPECT_EQ(admission.inflight(), 0);
}

TEST(AdmissionTest, CancelWaitRemovesTheWaiterExactlyOnce) {
  TimerThread timers;
  AdmissionController admission(1, 4, kLong, &timers);
  ASSERT_EQ(admission.Acquire(nullptr).outcome, AdmissionController::Outcome::kAdmitted);
  bool called = false;
  auto waiter = admission.Acquire([&](absl::Status) { called = true; });
  EXPECT_TRUE(admission.CancelWait(waiter.ticket));
  EXPECT_FALSE(admission.CancelWait(waiter.ticket));
  admission.Release();
  EXPECT_FALSE(called);
  EXPECT_EQ(admission.inflight(), 0);
}

TEST(AdmissionTest, ConcurrentAcquireReleaseKeepsTheBound) {
  TimerThread timers;
  std::atomic<int> max_seen{0};
  AdmissionController admission(3, 1000, kLong, &timers, [&](int inflight, int) {
    int prev = max_seen.load();
    while (inflight > prev && !max_seen.compare_exchange_weak(prev, inflight)) {
    }
  });
  std::atomic<int> holders{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        absl::Notification got;
        auto r = admission.Acquire([&](absl::Status s) {
          EXPECT_TRUE(s.ok());
          got.Notify();
        });
        if (r.outcome == AdmissionController::Outcome::kAdmitted) got.Notify();
        ASSERT_NE(r.outcome, AdmissionController::Outcome::kRejected);
        got.WaitForNotification();
        EXPECT_LE(++holders, 3);
        --holders;
        admission.Release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(max_seen.load(), 3);
  EXPECT_EQ(admission.inflight(), 0);
  EXPECT_EQ(admission.queued(), 0);
}

TEST(BackoffTest, DoublesWithJitterAndCaps) {
  std::mt19937_64 rng(8);
  const absl::Duration base = absl::Milliseconds(50), cap = absl::Milliseconds(1000);
  for (int attempt = 1; attempt <= 8; ++attempt) {
    absl::Duration nominal = base;
    for (int i = 1; i < attempt; ++i) nominal = std::min(nominal * 2, cap);
    for (int k = 0; k < 200; ++k) {
      const absl::Duration d = RetryBackoff(attempt, base, cap, rng());
      EXPECT_GE(d, nominal * 0.5);
      EXPECT_LT(d, nominal * 1.5);
    }
  }
}

}  // namespace
}  // namespace pkv::router
