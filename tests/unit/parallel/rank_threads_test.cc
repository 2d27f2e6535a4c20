// RankThreads: every rank runs once per Run, all at the same time, and errors come back in rank
// order.
#include "worker/parallel/rank_threads.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "worker/parallel/in_process_group.h"

namespace pkv {
namespace {

TEST(RankThreadsTest, RunsEveryRankOncePerRun) {
  for (int world : {1, 2, 3, 6}) {
    RankThreads threads(world);
    for (int run = 0; run < 50; ++run) {
      std::vector<std::atomic<int>> calls(world);
      ASSERT_TRUE(threads
                      .Run([&](int r) {
                        calls[r].fetch_add(1);
                        return absl::OkStatus();
                      })
                      .ok());
      for (int r = 0; r < world; ++r) EXPECT_EQ(calls[r].load(), 1) << "rank " << r;
    }
  }
}

TEST(RankThreadsTest, RanksRunConcurrentlyAndRankZeroOnTheCaller) {
  constexpr int kWorld = 4;
  RankThreads threads(kWorld);
  auto group = InProcessGroup::Create(kWorld);
  ASSERT_TRUE(group.ok());
  std::vector<std::thread::id> ids(kWorld);
  // A barrier only completes when all ranks are inside fn at once.
  ASSERT_TRUE(threads
                  .Run([&](int r) {
                    ids[r] = std::this_thread::get_id();
                    return (*group)->rank(r)->Barrier();
                  })
                  .ok());
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), size_t{kWorld});
}

TEST(RankThreadsTest, ReturnsTheFirstErrorInRankOrder) {
  RankThreads threads(4);
  absl::Status s = threads.Run([](int r) {
    if (r >= 2) return absl::InternalError(absl::StrCat("rank ", r));
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "rank 2");
  // The next run starts clean.
  EXPECT_TRUE(threads.Run([](int) { return absl::OkStatus(); }).ok());
}

}  // namespace
}  // namespace pkv
