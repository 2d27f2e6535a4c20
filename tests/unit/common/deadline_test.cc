// Deadline clamping: far-future and infinite deadlines become "none" instead of overflowing the
// int64-nanosecond std::chrono::system_clock (which ends in 2262).
#include "common/deadline.h"

#include "gtest/gtest.h"

namespace pkv {
namespace {

TEST(DeadlineTest, FarFutureIsNoDeadline) {
  EXPECT_EQ(ToClientDeadline(absl::InfiniteFuture()), std::chrono::system_clock::time_point::max());
  EXPECT_EQ(ToClientDeadline(absl::FromUnixSeconds(kFarFutureUnixSeconds)),
            std::chrono::system_clock::time_point::max());
  // 11 400 years ahead (grpc-timeout 99999999H) is beyond what chrono holds.
  EXPECT_EQ(ToClientDeadline(absl::Now() + absl::Hours(99999999)),
            std::chrono::system_clock::time_point::max());
}

TEST(DeadlineTest, NearDeadlinesKeepTheirInstant) {
  const absl::Time t = absl::FromUnixSeconds(1800000000) + absl::Milliseconds(250);
  EXPECT_EQ(absl::FromChrono(ToClientDeadline(t)), t);
}

TEST(DeadlineTest, PassedOnlyWhenFinite) {
  const absl::Time now = absl::Now();
  EXPECT_FALSE(DeadlinePassed(absl::InfiniteFuture(), now));
  EXPECT_TRUE(DeadlinePassed(now - absl::Seconds(1), now));
  EXPECT_TRUE(DeadlinePassed(now, now));
  EXPECT_FALSE(DeadlinePassed(now + absl::Seconds(1), now));
}

}  // namespace
}  // namespace pkv
