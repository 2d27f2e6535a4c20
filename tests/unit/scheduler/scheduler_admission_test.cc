// Scheduler admission: free-page and watermark gating, bounded queue errors, priority order,
// queued-token accounting and deadline expiry.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/scheduler/scheduler_test_util.h"

namespace pkv {
namespace {

using test::Driver;
using test::MakeConfig;
using test::MakeSeq;

std::vector<uint64_t> Ids(const std::vector<test::ItemRecord>& records) {
  std::vector<uint64_t> ids;
  for (const auto& r : records) ids.push_back(r.id);
  return ids;
}

TEST(SchedulerAdmissionTest, AdmitsOnlyWhatFreePagesCover) {
  Driver d(MakeConfig(/*page_size=*/4, /*max_batch_tokens=*/100), /*num_pages=*/10);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(d.Add(MakeSeq(id, 16, 2)).ok());  // 4 pages
  const auto step = d.Step();
  EXPECT_EQ(Ids(step), (std::vector<uint64_t>{1, 2}));  // 8 pages used, 2 free < 4
  for (const auto& r : step) {
    EXPECT_EQ(r.start_pos, 0);
    EXPECT_EQ(r.num_new_tokens, 16);
    EXPECT_TRUE(r.sample);
  }
  EXPECT_EQ(d.sched().num_running(), 2);
  EXPECT_EQ(d.sched().num_waiting(), 1);
  d.ExpectLedger();
}

TEST(SchedulerAdmissionTest, WatermarkKeepsPagesFree) {
  SchedulerConfig config = MakeConfig(4, 100);
  config.watermark_pages = 3;
  Driver d(config, 10);
  for (uint64_t id = 1; id <= 2; ++id) ASSERT_TRUE(d.Add(MakeSeq(id, 16, 2)).ok());
  // First: 4 + 3 <= 10. Second: 4 + 3 > 6 free.
  EXPECT_EQ(Ids(d.Step()), (std::vector<uint64_t>{1}));
  EXPECT_EQ(d.sched().num_waiting(), 1);
}

// Random prompts against an independent model of the gating rule (FCFS, stop at the first that
// does not fit, budget and max_running), on the first step of an empty scheduler.
TEST(SchedulerAdmissionTest, RandomFirstStepMatchesGatingModel) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    SchedulerConfig config = MakeConfig(1 + rng() % 17, 16 + rng() % 200, 1 + rng() % 8);
    config.watermark_pages = rng() % 4;
    const int32_t num_pages = 8 + rng() % 40;
    Driver d(config, num_pages);
    std::vector<int32_t> prompts;
    for (uint64_t id = 1; id <= 10; ++id) {
      const int32_t prompt = 1 + rng() % 100;
      if (d.Add(MakeSeq(id, prompt, 1)).ok())
        prompts.push_back(prompt);
      else
        prompts.push_back(-1);  // too big for the pool
    }
    std::vector<uint64_t> want;
    int32_t free = num_pages, budget = config.max_batch_tokens;
    for (uint64_t id = 1; id <= 10; ++id) {
      const int32_t prompt = prompts[id - 1];
      if (prompt < 0) continue;
      if (budget == 0 || static_cast<int32_t>(want.size()) == config.max_running) break;
      const int32_t chunk = std::min(prompt, budget);
      const int32_t pages = (chunk + config.page_size - 1) / config.page_size;
      if (pages + config.watermark_pages > free) {
        if (!want.empty()) break;
        want.push_back(id);  // empty batch: admitted anyway, shrunk to the free pages
        break;
      }
      want.push_back(id);
      free -= pages;
      budget -= chunk;
    }
    EXPECT_EQ(Ids(d.Step()), want) << "seed " << seed;
    d.ExpectLedger();
  }
}

TEST(SchedulerAdmissionTest, BoundedQueueErrors) {
  SchedulerConfig config = MakeConfig(16, 64);
  config.max_waiting = 2;
  config.max_queued_tokens = 40;
  Driver d(config, /*num_pages=*/4);
  ASSERT_TRUE(d.Add(MakeSeq(1, 12, 4)).ok());
  absl::Status s = d.Add(MakeSeq(2, 29, 4));  // 12 + 29 = 41 > 40
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_queued_tokens = 40"), absl::string_view::npos) << s;
  ASSERT_TRUE(d.Add(MakeSeq(3, 28, 4)).ok());  // exactly 40
  s = d.Add(MakeSeq(4, 1, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_waiting = 2"), absl::string_view::npos) << s;
  EXPECT_EQ(d.sched().num_waiting(), 2);
  EXPECT_EQ(d.sched().num_queued_tokens(), 40);
}

TEST(SchedulerAdmissionTest, RejectsWhatCouldNeverFit) {
  Driver d(MakeConfig(16, 64), /*num_pages=*/4);  // 64 tokens of KV
  absl::Status s = d.Add(MakeSeq(1, 60, 5));      // 65 tokens -> 5 pages
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("5 KV pages"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("only 4 pages"), absl::string_view::npos) << s;
  EXPECT_TRUE(d.Add(MakeSeq(2, 60, 4)).ok());                                     // exactly 4 pages
  EXPECT_EQ(d.Add(MakeSeq(3, 0, 4)).code(), absl::StatusCode::kInvalidArgument);  // empty prompt
  EXPECT_EQ(d.Add(MakeSeq(2, 3, 4)).code(), absl::StatusCode::kInvalidArgument);  // duplicate id
  EXPECT_EQ(d.Add(MakeSeq(4, 3, 0)).code(), absl::StatusCode::kInvalidArgument);  // max_tokens 0
  EXPECT_EQ(d.sched().num_waiting(), 1);
}

// max_running 1 serialises sequences, so the order they first run is the admission order:
// priority descending, FCFS within a priority (an independent stable sort).
TEST(SchedulerAdmissionTest, PriorityOrderIsStableDescending) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed);
    Driver d(MakeConfig(4, 64, /*max_running=*/1), 32);
    std::vector<std::pair<int32_t, uint64_t>> order;  // (priority, id)
    for (uint64_t id = 1; id <= 12; ++id) {
      const int32_t priority = static_cast<int32_t>(rng() % 4) - 1;
      ASSERT_TRUE(d.Add(MakeSeq(id, 1 + rng() % 10, 1 + rng() % 3, priority)).ok());
      order.push_back({priority, id});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<uint64_t> want, got;
    for (const auto& [p, id] : order) want.push_back(id);
    for (int step = 0; step < 200 && !d.sched().idle(); ++step) {
      for (const auto& r : d.Step())
        if (r.start_pos == 0) got.push_back(r.id);
    }
    EXPECT_EQ(got, want) << "seed " << seed;
  }
}

TEST(SchedulerAdmissionTest, QueuedTokensCountWaitingAndUnprefilledPrompt) {
  Driver d(MakeConfig(4, /*max_batch_tokens=*/10), 64);
  ASSERT_TRUE(d.Add(MakeSeq(1, 25, 3)).ok());
  ASSERT_TRUE(d.Add(MakeSeq(2, 7, 3)).ok());
  EXPECT_EQ(d.sched().num_queued_tokens(), 32);
  d.Step();  // seq 1 fed 10 of 25
  EXPECT_EQ(d.sched().num_queued_tokens(), 15 + 7);
  d.Step();  // seq 1: 20 of 25
  d.Step();  // seq 1 done with its prompt (+1 sampled), seq 2 fed 5 of 7
  EXPECT_EQ(d.sched().num_queued_tokens(), 2);
  d.Step();
  EXPECT_EQ(d.sched().num_queued_tokens(), 0);
}

TEST(SchedulerAdmissionTest, ExpiredSequencesAreDroppedInAnyState) {
  Driver d(MakeConfig(4, /*max_batch_tokens=*/8, /*max_running=*/2), 64);
  const absl::Time t0 = absl::UnixEpoch();
  auto running = MakeSeq(1, 20, 5);
  running->deadline = t0 + absl::Seconds(10);
  auto waiting = MakeSeq(2, 4, 5);
  waiting->deadline = t0 + absl::Seconds(5);
  auto lasting = MakeSeq(3, 4, 5);
  ASSERT_TRUE(d.Add(std::move(running)).ok());
  ASSERT_TRUE(d.Add(std::move(waiting)).ok());
  ASSERT_TRUE(d.Add(std::move(lasting)).ok());
  d.Step(t0);  // seq 1 gets the whole budget; 2 and 3 wait
  ASSERT_GT(d.seq(1)->blocks.num_pages(), 0);
  d.Step(t0 + absl::Seconds(5));  // deadline == now is not past
  EXPECT_TRUE(d.dropped().empty());
  d.Step(t0 + absl::Seconds(6));
  ASSERT_EQ(d.dropped().size(), 1u);
  EXPECT_EQ(d.dropped()[0].seq->id, 2u);
  d.Step(t0 + absl::Seconds(11));
  ASSERT_EQ(d.dropped().size(), 2u);
  EXPECT_EQ(d.dropped()[1].seq->id, 1u);
  for (const auto& dropped : d.dropped()) {
    EXPECT_EQ(dropped.reason.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(dropped.seq->blocks.num_pages(), 0);
    EXPECT_EQ(dropped.seq->state, SequenceState::kFinished);
  }
  d.ExpectLedger();
  EXPECT_EQ(d.sched().num_running() + d.sched().num_waiting(), 1);
}

}  // namespace
}  // namespace pkv
