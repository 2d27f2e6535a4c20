// InProcessGroup: all-reduce equals the rank-order sum bit for bit on every rank, all-gather is a
// rank-major concatenation, collectives run back to back without races, Abort() unblocks ranks.
#include "worker/parallel/in_process_group.h"

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "worker/parallel/rank_threads.h"

namespace pkv {
namespace {

std::vector<float> RandomVector(std::mt19937* rng, int64_t n) {
  // Mixed magnitudes make float addition order-sensitive, so a wrong order shows up in the bits.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(normal(*rng), exponent(*rng));
  return v;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(InProcessGroupTest, RejectsBadWorldSizes) {
  EXPECT_EQ(InProcessGroup::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InProcessGroup::Create(-3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InProcessGroup::Create(InProcessGroup::kMaxWorldSize + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(InProcessGroup::Create(InProcessGroup::kMaxWorldSize).ok());
}

TEST(InProcessGroupTest, AllReduceSumIsTheRankOrderSumOnEveryRank) {
  std::mt19937 rng(20261201);
  for (int world : {1, 2, 3, 4, 5, 8}) {
    auto group = InProcessGroup::Create(world);
    ASSERT_TRUE(group.ok());
    RankThreads threads(world);
    for (int64_t count : {0, 1, 3, 7, 64, 1000, 4099}) {
      std::vector<std::vector<float>> data(world);
      for (auto& d : data) d = RandomVector(&rng, count);
      std::vector<float> expected(count);
      for (int64_t i = 0; i < count; ++i) {
        float sum = data[0][i];
        for (int r = 1; r < world; ++r) sum += data[r][i];
        expected[i] = sum;
      }
      ASSERT_TRUE(
          threads.Run([&](int r) { return (*group)->rank(r)->AllReduceSum(data[r].data(), count); })
              .ok());
      for (int r = 0; r < world; ++r) {
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_TRUE(SameBits(data[r][i], expected[i]))
              << "world " << world << " count " << count << " rank " << r << " element " << i
              << ": " << data[r][i] << " vs " << expected[i];
        }
      }
    }
  }
}

TEST(InProcessGroupTest, AllGatherConcatenatesRankMajor) {
  std::mt19937 rng(7);
  for (int world : {1, 2, 3, 4}) {
    auto group = InProcessGroup::Create(world);
    ASSERT_TRUE(group.ok());
    RankThreads threads(world);
    for (int64_t count : {0, 1, 5, 513}) {
      std::vector<std::vector<float>> send(world), recv(world);
      for (int r = 0; r < world; ++r) {
        send[r] = RandomVector(&rng, count);
        recv[r].assign(world * count, std::nanf(""));
      }
      ASSERT_TRUE(threads
                      .Run([&](int r) {
                        return (*group)->rank(r)->AllGather(send[r].data(), count, recv[r].data());
                      })
                      .ok());
      for (int r = 0; r < world; ++r) {
        for (int src = 0; src < world; ++src) {
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_TRUE(SameBits(recv[r][src * count + i], send[src][i]))
                << "rank " << r << " slot " << src << " element " << i;
          }
        }
      }
    }
  }
}

// Many collectives of varying sizes back to back, as a forward pass issues them: a rank racing
// ahead into the next collective must not disturb one still finishing the previous.
TEST(InProcessGroupTest, BackToBackCollectivesStayConsistent) {
  constexpr int kWorld = 4;
  constexpr int kRounds = 300;
  auto group = InProcessGroup::Create(kWorld);
  ASSERT_TRUE(group.ok());
  RankThreads threads(kWorld);
  std::mt19937 size_rng(3);
  std::vector<int64_t> sizes(kRounds);
  for (int64_t& s : sizes) s = std::uniform_int_distribution<int64_t>(1, 300)(size_rng);
  std::vector<int> bad(kWorld, 0);
  ASSERT_TRUE(threads
                  .Run([&](int r) -> absl::Status {
                    Communicator* c = (*group)->rank(r);
                    for (int round = 0; round < kRounds; ++round) {
                      const int64_t n = sizes[round];
                      // Integers small enough to add exactly: the expected sum is known.
                      std::vector<float> v(n);
                      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(r + 1 + i);
                      if (absl::Status s = c->AllReduceSum(v.data(), n); !s.ok()) return s;
                      for (int64_t i = 0; i < n; ++i) {
                        if (v[i] != kWorld * (kWorld + 1) / 2 + kWorld * i) ++bad[r];
                      }
                      std::vector<float> g(kWorld * n);
                      if (absl::Status s = c->AllGather(v.data(), n, g.data()); !s.ok()) return s;
                      for (int64_t i = 0; i < kWorld * n; ++i) {
                        if (g[i] != v[i % n]) ++bad[r];
                      }
                      if (round % 7 == 0) {
                        if (absl::Status s = c->Barrier(); !s.ok()) return s;
                      }
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(bad, std::vector<int>(kWorld, 0));
}

TEST(InProcessGroupTest, AbortUnblocksWaitingRanksAndSticks) {
  constexpr int kWorld = 3;
  auto group = InProcessGroup::Create(kWorld);
  ASSERT_TRUE(group.ok());
  std::vector<absl::Status> results(kWorld);
  std::vector<std::thread> waiting;
  std::vector<std::vector<float>> data(kWorld, std::vector<float>(16, 1.0f));
  // Ranks 1 and 2 enter an all-reduce that rank 0 never joins.
  for (int r = 1; r < kWorld; ++r) {
    waiting.emplace_back(
        [&, r] { results[r] = (*group)->rank(r)->AllReduceSum(data[r].data(), 16); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*group)->Abort("rank 0 failed");
  for (std::thread& t : waiting) t.join();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kAborted);
    EXPECT_NE(std::string(results[r].message()).find("rank 0 failed"), std::string::npos);
  }
  EXPECT_EQ((*group)->rank(0)->Barrier().code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*group)->rank(0)->AllReduceSum(data[0].data(), 16).code(), absl::StatusCode::kAborted);
}

TEST(InProcessGroupTest, ReportsRankWorldAndTransport) {
  auto group = InProcessGroup::Create(3);
  ASSERT_TRUE(group.ok());
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ((*group)->rank(r)->rank(), r);
    EXPECT_EQ((*group)->rank(r)->world_size(), 3);
    EXPECT_EQ((*group)->rank(r)->transport(), "in-process");
  }
}

}  // namespace
}  // namespace pkv
