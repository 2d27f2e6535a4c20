// CircuitBreaker: the ejection state machine on simulated time (no sleeping, no wall clock).
#include "router/circuit_breaker.h"

#include <random>

#include "gtest/gtest.h"

namespace pkv::router {
namespace {

using State = CircuitBreaker::State;

CircuitBreakerOptions TestOptions() {
  CircuitBreakerOptions o;
  o.base_ejection = absl::Milliseconds(200);
  o.max_ejection = absl::Seconds(2);
  o.reset_after = absl::Seconds(10);
  return o;
}

TEST(CircuitBreakerTest, ClosedAlwaysProbesAndTripOpensUntilReopen) {
  std::mt19937_64 rng(1);
  CircuitBreaker b(TestOptions());
  const absl::Time t0 = absl::UnixEpoch() + absl::Hours(1);
  EXPECT_TRUE(b.closed());
  EXPECT_TRUE(b.AllowProbe(t0));
  EXPECT_TRUE(b.AllowProbe(t0));  // regular checks are not limited while closed
  EXPECT_TRUE(b.Trip(t0, rng()));
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_EQ(b.streak(), 1);
  // Ejected for [0.5, 1) x base.
  EXPECT_GE(b.reopen_at() - t0, absl::Milliseconds(100));
  EXPECT_LT(b.reopen_at() - t0, absl::Milliseconds(200));
  EXPECT_FALSE(b.AllowProbe(b.reopen_at() - absl::Nanoseconds(1)));
  EXPECT_TRUE(b.AllowProbe(b.reopen_at()));  // exactly one probe
  EXPECT_EQ(b.state(), State::kHalfOpen);
  EXPECT_FALSE(b.AllowProbe(b.reopen_at() + absl::Seconds(5)));  // while it is outstanding
  b.OnProbeSuccess(b.reopen_at() + absl::Milliseconds(1));
  EXPECT_TRUE(b.closed());
}

TEST(CircuitBreakerTest, FailedProbesBackOffExponentiallyUpToTheCap) {
  const CircuitBreakerOptions o = TestOptions();
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    CircuitBreaker b(o);
    absl::Time now = absl::UnixEpoch();
    EXPECT_TRUE(b.Trip(now, rng()));
    for (int k = 2; k <= 12; ++k) {
      now = b.reopen_at();
      ASSERT_TRUE(b.AllowProbe(now));
      EXPECT_FALSE(b.Trip(now, rng())) << "a re-trip of a half-open breaker is not a new ejection";
      EXPECT_EQ(b.streak(), k);
      const absl::Duration full = b.EjectionBeforeJitter(k);
      EXPECT_LE(full, o.max_ejection);
      EXPECT_GE(full, b.EjectionBeforeJitter(k - 1));
      EXPECT_GE(b.reopen_at() - now, full / 2);
      EXPECT_LT(b.reopen_at() - now, full);
    }
    EXPECT_EQ(b.EjectionBeforeJitter(12), o.max_ejection);
  }
  CircuitBreaker b(o);
  EXPECT_EQ(b.EjectionBeforeJitter(1), absl::Milliseconds(200));
  EXPECT_EQ(b.EjectionBeforeJitter(2), absl::Milliseconds(400));
  EXPECT_EQ(b.EjectionBeforeJitter(4), absl::Milliseconds(1600));
  EXPECT_EQ(b.EjectionBeforeJitter(5), absl::Seconds(2));
}

TEST(CircuitBreakerTest, StreakResetsOnlyAfterStayingClosedLongEnough) {
  std::mt19937_64 rng(7);
  const CircuitBreakerOptions o = TestOptions();
  CircuitBreaker b(o);
  absl::Time now = absl::UnixEpoch();
  b.Trip(now, rng());
  for (int i = 0; i < 3; ++i) {  // flapping: closes briefly, trips again
    now = b.reopen_at();
    ASSERT_TRUE(b.AllowProbe(now));
    b.OnProbeSuccess(now);
    now += o.reset_after / 2;
    EXPECT_TRUE(b.Trip(now, rng()));
  }
  EXPECT_EQ(b.streak(), 4);
  now = b.reopen_at();
  ASSERT_TRUE(b.AllowProbe(now));
  b.OnProbeSuccess(now);
  now += o.reset_after;  // stable for reset_after: forgiven
  EXPECT_TRUE(b.Trip(now, rng()));
  EXPECT_EQ(b.streak(), 1);
}

TEST(CircuitBreakerTest, LateAnswerToAnOldProbeDoesNotCloseAnOpenBreaker) {
  std::mt19937_64 rng(3);
  CircuitBreaker b(TestOptions());
  const absl::Time t0 = absl::UnixEpoch();
  b.Trip(t0, rng());
  b.OnProbeSuccess(t0 + absl::Milliseconds(1));
  EXPECT_EQ(b.state(), State::kOpen);
}

// A worker down for a minute, probed by a 10 ms poll loop that asks AllowProbe every tick: the
// probes are spaced by at least half the current ejection and at most one is outstanding.
TEST(CircuitBreakerTest, DownWorkerSeesOneProbePerEjectionPeriod) {
  for (uint64_t seed = 0; seed < 10; ++seed) {
    std::mt19937_64 rng(seed);
    const CircuitBreakerOptions o = TestOptions();
    CircuitBreaker b(o);
    absl::Time now = absl::UnixEpoch();
    b.Trip(now, rng());
    int probes = 0;
    absl::Time last_probe = absl::InfinitePast();
    const absl::Time end = now + absl::Minutes(1);
    for (; now < end; now += absl::Milliseconds(10)) {
      if (!b.AllowProbe(now)) continue;
      ++probes;
      if (last_probe != absl::InfinitePast()) {
        EXPECT_GE(now - last_probe, b.EjectionBeforeJitter(b.streak()) / 2);
      }
      last_probe = now;
      b.Trip(now + absl::Milliseconds(5), rng());  // the probe fails (connection refused)
    }
    // Steady state: one probe per [1, 2) s ejection, so at most ~60 in a minute.
    EXPECT_LE(probes, 70) << "seed " << seed;
    EXPECT_GE(probes, 25) << "seed " << seed;
  }
}

}  // namespace
}  // namespace pkv::router
