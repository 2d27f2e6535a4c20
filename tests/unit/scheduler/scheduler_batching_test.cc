// Scheduler step mechanics: chunked prefill under the token budget, decode rows first,
// preemption by recompute, and aborts in every state.
#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/scheduler/scheduler_test_util.h"

namespace pkv {
namespace {

using test::Driver;
using test::ExpectedOutput;
using test::ItemRecord;
using test::MakeConfig;
using test::MakeSeq;

int32_t TotalTokens(const std::vector<ItemRecord>& records) {
  int32_t total = 0;
  for (const auto& r : records) total += r.num_new_tokens;
  return total;
}

TEST(SchedulerBatchingTest, ChunkedPrefillSplitsAtTheBudget) {
  Driver d(MakeConfig(4, /*max_batch_tokens=*/10), 64);
  ASSERT_TRUE(d.Add(MakeSeq(1, 25, 2)).ok());
  ASSERT_TRUE(d.Add(MakeSeq(2, 7, 2)).ok());
  auto s1 = d.Step();
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].num_new_tokens, 10);
  EXPECT_FALSE(s1[0].sample);
  auto s2 = d.Step();
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_EQ(s2[0].start_pos, 10);
  auto s3 = d.Step();  // 5 left for seq 1, the other 5 of the budget to seq 2
  ASSERT_EQ(s3.size(), 2u);
  EXPECT_EQ(s3[0].id, 1u);
  EXPECT_EQ(s3[0].num_new_tokens, 5);
  EXPECT_TRUE(s3[0].sample);
  EXPECT_EQ(s3[1].id, 2u);
  EXPECT_EQ(s3[1].num_new_tokens, 5);
  EXPECT_FALSE(s3[1].sample);
  auto s4 = d.Step();  // seq 1 decodes (first), seq 2 finishes its prompt
  ASSERT_EQ(s4.size(), 2u);
  EXPECT_EQ(s4[0].id, 1u);
  EXPECT_EQ(s4[0].num_new_tokens, 1);
  EXPECT_EQ(s4[1].id, 2u);
  EXPECT_EQ(s4[1].start_pos, 5);
  EXPECT_EQ(s4[1].num_new_tokens, 2);
  EXPECT_TRUE(s4[1].sample);
}

// With pages to spare and max_running >= budget, every step feeds exactly
// min(budget, all pending work).
TEST(SchedulerBatchingTest, RandomStepsFillTheBudgetExactly) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed);
    const int32_t budget = 8 + rng() % 100;
    Driver d(MakeConfig(1 + rng() % 16, budget, 1000), 100000);
    for (uint64_t id = 1; id <= 30; ++id) ASSERT_TRUE(d.Add(MakeSeq(id, 1 + rng() % 300, 4)).ok());
    for (int step = 0; step < 1000 && !d.sched().idle(); ++step) {
      const int64_t pending = d.PendingTokens();
      const int32_t fed = TotalTokens(d.Step());  // Step() checks decode rows come first
      EXPECT_EQ(fed, std::min<int64_t>(budget, pending)) << "seed " << seed << " step " << step;
    }
    EXPECT_TRUE(d.sched().idle());
  }
}

TEST(SchedulerBatchingTest, DecodeRowsComeFirst) {
  Driver d(MakeConfig(4, /*max_batch_tokens=*/16), 64);
  ASSERT_TRUE(d.Add(MakeSeq(1, 4, 8)).ok());
  d.Step();
  ASSERT_TRUE(d.Add(MakeSeq(2, 4, 8)).ok());
  d.Step();  // 1 decodes, 2 prefills
  ASSERT_TRUE(d.Add(MakeSeq(3, 40, 8)).ok());
  const auto records = d.Step();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].id, 1u);
  EXPECT_EQ(records[1].id, 2u);
  EXPECT_EQ(records[0].num_new_tokens, 1);
  EXPECT_EQ(records[1].num_new_tokens, 1);
  EXPECT_EQ(records[2].id, 3u);
  EXPECT_EQ(records[2].num_new_tokens, 14);  // what the two decode rows left of 16
}

// Three sequences, four tokens each, pool of 9 pages of 2: each holds 3 pages after step 2, and
// at step 4 the first one needs a fourth page; the victim must be the last admitted (3).
TEST(SchedulerBatchingTest, PreemptsTheLatestAdmittedAndRecomputesIt) {
  Driver d(MakeConfig(/*page_size=*/2, 64), /*num_pages=*/9);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(d.Add(MakeSeq(id, 4, 6)).ok());
  d.Step();
  d.Step();
  d.Step();
  EXPECT_EQ(d.sched().num_preemptions(), 0u);
  Sequence* victim = d.seq(3);
  const std::vector<int32_t> tokens_before = victim->tokens;
  ASSERT_EQ(victim->num_generated(), 3);
  const auto step4 = d.Step();
  EXPECT_EQ(d.sched().num_preemptions(), 1u);
  EXPECT_EQ(victim->state, SequenceState::kWaiting);
  EXPECT_EQ(victim->num_computed, 0);
  EXPECT_EQ(victim->num_preemptions, 1);
  EXPECT_EQ(victim->blocks.num_pages(), 0);
  EXPECT_EQ(victim->tokens, tokens_before);
  EXPECT_EQ(d.seq(1)->state, SequenceState::kRunning);
  EXPECT_EQ(d.seq(2)->state, SequenceState::kRunning);
  for (const auto& r : step4) EXPECT_NE(r.id, 3u);
  d.ExpectLedger();

  bool recomputed = false;
  for (int step = 0; step < 100 && !d.sched().idle(); ++step) {
    for (const auto& r : d.Step()) {
      if (r.id != 3 || r.start_pos != 0) continue;
      recomputed = true;  // re-fed prompt + generated tokens, then samples the next one
      EXPECT_EQ(r.num_new_tokens, static_cast<int32_t>(tokens_before.size()));
      EXPECT_TRUE(r.sample);
    }
    d.ExpectLedger();
  }
  EXPECT_TRUE(recomputed);
  ASSERT_EQ(d.finished().size(), 3u);
  for (const auto& seq : d.finished()) {
    const std::vector<int32_t> generated(seq->tokens.begin() + 4, seq->tokens.end());
    EXPECT_EQ(generated, ExpectedOutput(seq->id, 6)) << "seq " << seq->id;
  }
  EXPECT_EQ(d.pool().num_used(), 0);
}

// A preempted sequence goes to the front of the queue, ahead of newer higher-priority arrivals.
TEST(SchedulerBatchingTest, PreemptedSequenceIsReadmittedFirst) {
  Driver d(MakeConfig(2, 64), /*num_pages=*/6);
  ASSERT_TRUE(d.Add(MakeSeq(1, 4, 8)).ok());
  ASSERT_TRUE(d.Add(MakeSeq(2, 4, 8)).ok());
  while (d.sched().num_preemptions() == 0) d.Step();
  ASSERT_EQ(d.seq(2)->state, SequenceState::kWaiting);
  ASSERT_TRUE(d.Add(MakeSeq(3, 2, 1, /*priority=*/10)).ok());
  std::vector<uint64_t> admitted;
  for (int step = 0; step < 100 && !d.sched().idle(); ++step) {
    for (const auto& r : d.Step())
      if (r.start_pos == 0) admitted.push_back(r.id);
  }
  EXPECT_EQ(admitted, (std::vector<uint64_t>{2, 3}));
}

// The pages a preemption frees are what the running batch just ran out of, so that step admits
// nothing, even when the victim's next (budget-limited) chunk would fit them.
TEST(SchedulerBatchingTest, NoAdmissionInAStepThatPreempted) {
  for (int32_t budget : {3, 4, 5}) {
    Driver d(MakeConfig(/*page_size=*/1, budget), /*num_pages=*/10);
    ASSERT_TRUE(d.Add(MakeSeq(1, 2, 8)).ok());
    ASSERT_TRUE(d.Add(MakeSeq(2, 2, 8)).ok());
    std::vector<ItemRecord> records;
    for (int step = 0; step < 50 && d.sched().num_preemptions() == 0; ++step) records = d.Step();
    ASSERT_EQ(d.sched().num_preemptions(), 1u) << "budget " << budget;
    EXPECT_EQ(d.seq(2)->state, SequenceState::kWaiting);
    for (const auto& r : records) EXPECT_NE(r.start_pos, 0) << "admitted seq " << r.id;
    ASSERT_GE(d.pool().num_free(), budget - 1);  // the victim's next chunk would have fit
  }
}

// A sequence as large as the whole pool still runs, alone, to the end.
TEST(SchedulerBatchingTest, PoolSizedSequenceMakesProgress) {
  SchedulerConfig config = MakeConfig(4, 6);
  config.watermark_pages = 5;  // would block admission forever without the progress rule
  Driver d(config, /*num_pages=*/5);
  ASSERT_TRUE(d.Add(MakeSeq(1, 15, 5)).ok());  // 20 tokens = 5 pages
  ASSERT_TRUE(d.Add(MakeSeq(2, 3, 1)).ok());
  for (int step = 0; step < 100 && !d.sched().idle(); ++step) d.Step();
  EXPECT_TRUE(d.sched().idle());
  EXPECT_EQ(d.finished().size(), 2u);
  EXPECT_EQ(d.pool().num_used(), 0);
}

// Abort in each state: waiting, mid-prefill, decoding, preempted, and inside an abandoned step.
TEST(SchedulerBatchingTest, AbortInEveryStateFreesPages) {
  Driver d(MakeConfig(2, /*max_batch_tokens=*/6), /*num_pages=*/10);
  ASSERT_TRUE(d.Add(MakeSeq(1, 3, 9)).ok());   // decodes soon
  ASSERT_TRUE(d.Add(MakeSeq(2, 12, 4)).ok());  // long prefill
  ASSERT_TRUE(d.Add(MakeSeq(3, 2, 4)).ok());   // stays waiting a while
  d.Step();
  d.Step();
  ASSERT_EQ(d.seq(2)->state, SequenceState::kRunning);
  ASSERT_LT(d.seq(2)->num_computed, 12);
  ASSERT_GT(d.seq(2)->num_computed, 0);
  auto aborted = d.sched().Abort(2);  // mid-prefill
  d.Forget(2);
  ASSERT_NE(aborted, nullptr);
  EXPECT_EQ(aborted->blocks.num_pages(), 0);
  EXPECT_EQ(aborted->state, SequenceState::kFinished);
  d.ExpectLedger();
  EXPECT_EQ(d.sched().Abort(2), nullptr);  // unknown now
  EXPECT_EQ(d.sched().Abort(99), nullptr);

  ASSERT_TRUE(d.Add(MakeSeq(4, 5, 2)).ok());
  EXPECT_NE(d.sched().Abort(4), nullptr);  // waiting, never admitted
  d.Forget(4);
  d.ExpectLedger();

  // Abandoned step: pages allocated by Schedule(), CommitStep never called.
  ScheduledBatch batch = d.sched().Schedule(absl::UnixEpoch(), nullptr);
  ASSERT_FALSE(batch.empty());
  d.ExpectLedger();
  for (uint64_t id : {1u, 3u}) {
    ASSERT_NE(d.seq(id), nullptr);
    EXPECT_NE(d.sched().Abort(id), nullptr);
    d.Forget(id);
    d.ExpectLedger();
  }
  EXPECT_TRUE(d.sched().idle());
  EXPECT_EQ(d.pool().num_used(), 0);
}

TEST(SchedulerBatchingTest, AbortOfPreemptedSequence) {
  Driver d(MakeConfig(2, 64), /*num_pages=*/6);
  ASSERT_TRUE(d.Add(MakeSeq(1, 4, 8)).ok());
  ASSERT_TRUE(d.Add(MakeSeq(2, 4, 8)).ok());
  while (d.sched().num_preemptions() == 0) d.Step();
  ASSERT_EQ(d.seq(2)->num_preemptions, 1);
  EXPECT_NE(d.sched().Abort(2), nullptr);
  d.Forget(2);
  d.ExpectLedger();
  EXPECT_NE(d.sched().Abort(1), nullptr);  // decoding
  d.Forget(1);
  EXPECT_EQ(d.pool().num_used(), 0);
  EXPECT_TRUE(d.sched().idle());
}

}  // namespace
}  // namespace pkv

namespace pkv {
namespace {

// Step pipelining (scheduler.h): a launched step is committed at once with its tokens pending;
// the next step feeds the pending token; a sequence whose pending token is its last is not
// scheduled again; an item whose sequence left since the launch (seq null) is skipped.
TEST(SchedulerBatchingTest, PendingTokensAreFedOnceAndTheLastIsNotScheduledPast) {
  test::Driver d(test::MakeConfig(4, /*max_batch_tokens=*/16), 64);
  ASSERT_TRUE(d.Add(test::MakeSeq(1, 5, /*max_tokens=*/2)).ok());
  ASSERT_TRUE(d.Add(test::MakeSeq(2, 3, /*max_tokens=*/4)).ok());
  Scheduler& s = d.sched();
  ScheduledBatch prefill = s.Schedule(absl::UnixEpoch(), nullptr);
  ASSERT_EQ(prefill.items.size(), 2u);
  s.CommitStep(prefill, {kPendingToken, kPendingToken});
  Sequence* one = prefill.items[0].seq;
  EXPECT_EQ(one->tokens.back(), kPendingToken);
  EXPECT_EQ(one->num_computed, 5);

  ScheduledBatch decode = s.Schedule(absl::UnixEpoch(), nullptr);
  ASSERT_EQ(decode.items.size(), 2u);
  EXPECT_EQ(decode.items[0].start_pos, 5);  // the pending token, fed alone
  EXPECT_EQ(decode.items[0].num_new_tokens, 1);
  one->tokens[5] = 100;  // the engine writes the first step's samples over their places
  prefill.items[1].seq->tokens[3] = 200;
  // The engine nulls the item of a sequence that left it after the launch (finished, cancelled):
  // the commit skips it (here sequence 2 is still queued, so none of that step is committed).
  decode.items[1].seq = nullptr;
  s.CommitStep(decode, {kPendingToken, kPendingToken});
  EXPECT_EQ(one->num_computed, 6);
  EXPECT_TRUE(one->generation_done());  // 2 of 2, the second still pending

  // Nothing more for sequence 1 until the engine finishes it; sequence 2 was not committed, so
  // it feeds the same position again.
  ScheduledBatch next = s.Schedule(absl::UnixEpoch(), nullptr);
  ASSERT_EQ(next.items.size(), 1u);
  EXPECT_EQ(next.items[0].seq->id, 2u);
  EXPECT_EQ(next.items[0].start_pos, 3);
}

}  // namespace
}  // namespace pkv
