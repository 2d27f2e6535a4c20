// Scheduler with the prefix cache: a repeated or shared prompt skips its cached full pages, at
// least the last token is always computed, pages are shared by refcount across running
// sequences, preemption and abort release references, turning the cache off turns all of it off,
// and the pool is whole (free + evictable == total) at idle.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/scheduler/scheduler_test_util.h"

namespace pkv {
namespace {

using test::Driver;
using test::ExpectedOutput;
using test::ItemRecord;
using test::MakeConfig;

// A sequence whose prompt is `prompt` (MakeSeq's prompts differ per id; these must not).
std::unique_ptr<Sequence> SeqWithPrompt(uint64_t id, const std::vector<int32_t>& prompt,
                                        int32_t max_tokens) {
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->tokens = prompt;
  seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  seq->params.max_tokens = max_tokens;
  return seq;
}

std::vector<int32_t> Prompt(int32_t n, int32_t seed) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(test::FakeToken(seed, i));
  return p;
}

const ItemRecord* FirstItemOf(const std::vector<ItemRecord>& items, uint64_t id) {
  for (const ItemRecord& r : items)
    if (r.id == id) return &r;
  return nullptr;
}

void RunUntilIdle(Driver* d) {
  for (int i = 0; i < 1000 && !d->sched().idle(); ++i) d->Step();
  ASSERT_TRUE(d->sched().idle());
}

// Distinct pages the live sequences hold equals the pool's used pages, and each page's refcount
// is the number of its holders.
void ExpectSharedLedger(Driver* d, const std::vector<uint64_t>& ids) {
  std::map<int32_t, int32_t> holders;
  for (uint64_t id : ids)
    if (Sequence* s = d->seq(id))
      for (int32_t p : s->blocks.pages()) ++holders[p];
  EXPECT_EQ(static_cast<int32_t>(holders.size()), d->pool().num_used());
  for (const auto& [page, n] : holders) EXPECT_EQ(d->pool().RefCount(page), n) << "page " << page;
}

TEST(SchedulerPrefixTest, RepeatedPromptSkipsItsCachedPages) {
  Driver d(MakeConfig(/*page_size=*/4, /*max_batch_tokens=*/64), /*num_pages=*/16);
  const std::vector<int32_t> prompt = Prompt(10, 77);  // 2 full pages + 2 tokens
  ASSERT_TRUE(d.Add(SeqWithPrompt(1, prompt, 3)).ok());
  RunUntilIdle(&d);
  EXPECT_EQ(d.pool().num_free(), 16);
  EXPECT_GE(d.pool().num_evictable(), 2);
  EXPECT_EQ(d.sched().prefix_cache_hits(), 0u);
  EXPECT_EQ(d.sched().prefix_cache_queries(), 10u);

  ASSERT_TRUE(d.Add(SeqWithPrompt(2, prompt, 3)).ok());
  const std::vector<ItemRecord> step = d.Step();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start_pos, 8);
  EXPECT_EQ(step[0].num_new_tokens, 2);
  EXPECT_TRUE(step[0].sample);
  EXPECT_EQ(d.seq(2)->num_cached_tokens, 8);
  EXPECT_EQ(d.sched().prefix_cache_hits(), 8u);
  EXPECT_EQ(d.sched().prefix_cache_queries(), 20u);
  RunUntilIdle(&d);
  ASSERT_EQ(d.finished().size(), 2u);
  const std::vector<int32_t> out(d.finished()[1]->tokens.begin() + 10,
                                 d.finished()[1]->tokens.end());
  EXPECT_EQ(out, ExpectedOutput(2, 3));
  EXPECT_EQ(d.pool().num_used(), 0);
  EXPECT_EQ(d.pool().num_free(), d.pool().num_pages());
}

TEST(SchedulerPrefixTest, FullyCachedPromptStillComputesItsLastPage) {
  Driver d(MakeConfig(4, 64), 16);
  const std::vector<int32_t> prompt = Prompt(8, 5);  // exactly 2 pages
  ASSERT_TRUE(d.Add(SeqWithPrompt(1, prompt, 1)).ok());
  RunUntilIdle(&d);
  ASSERT_EQ(d.pool().Lookup(d.finished()[0]->page_hashes[1]) >= 0, true);
  ASSERT_TRUE(d.Add(SeqWithPrompt(2, prompt, 1)).ok());
  const std::vector<ItemRecord> step = d.Step();
  ASSERT_EQ(step.size(), 1u);
  // Only page 0 is taken: the last token must be computed, into a private page.
  EXPECT_EQ(step[0].start_pos, 4);
  EXPECT_EQ(step[0].num_new_tokens, 4);
  EXPECT_TRUE(step[0].sample);
}

TEST(SchedulerPrefixTest, ConcurrentSequencesSharePublishedPages) {
  Driver d(MakeConfig(4, /*max_batch_tokens=*/8), 16);
  const std::vector<int32_t> prompt = Prompt(14, 3);
  ASSERT_TRUE(d.Add(SeqWithPrompt(1, prompt, 4)).ok());
  d.Step();  // chunk [0, 8): pages 0 and 1 written and published after the commit
  // The same first two pages, then its own: page 2 is not one sequence 1 is still computing, so
  // it is admitted at once (a wholly equal prompt would wait for it: in-flight prefix test).
  std::vector<int32_t> diverging(prompt.begin(), prompt.begin() + 8);
  for (int32_t t : Prompt(6, 4)) diverging.push_back(t);
  ASSERT_TRUE(d.Add(SeqWithPrompt(2, diverging, 4)).ok());
  const std::vector<ItemRecord> step = d.Step();
  const ItemRecord* second = FirstItemOf(step, 2);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->start_pos, 8);
  EXPECT_EQ(d.seq(2)->blocks.pages()[0], d.seq(1)->blocks.pages()[0]);
  EXPECT_EQ(d.seq(2)->blocks.pages()[1], d.seq(1)->blocks.pages()[1]);
  EXPECT_EQ(d.pool().RefCount(d.seq(1)->blocks.pages()[0]), 2);
  ExpectSharedLedger(&d, {1, 2});
  // An abort releases only its own references.
  ASSERT_NE(d.sched().Abort(1), nullptr);
  d.Forget(1);
  EXPECT_EQ(d.pool().RefCount(d.seq(2)->blocks.pages()[0]), 1);
  ExpectSharedLedger(&d, {2});
  RunUntilIdle(&d);
  EXPECT_EQ(d.finished().back()->tokens.size(), 18u);
  EXPECT_EQ(d.pool().num_used(), 0);
  EXPECT_EQ(d.pool().num_free(), d.pool().num_pages());
}

TEST(SchedulerPrefixTest, DecodePagesArePublishedForTheNextTurn) {
  Driver d(MakeConfig(4, 64), 16);
  const std::vector<int32_t> prompt = Prompt(6, 9);
  ASSERT_TRUE(d.Add(SeqWithPrompt(1, prompt, 7)).ok());
  RunUntilIdle(&d);
  // Next turn: history (prompt + reply) + a new message. 12 computed tokens = 3 full pages.
  std::vector<int32_t> next = d.finished()[0]->tokens;
  next.push_back(1);
  next.push_back(2);
  ASSERT_TRUE(d.Add(SeqWithPrompt(2, next, 1)).ok());
  const std::vector<ItemRecord> step = d.Step();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start_pos, 12);
}

TEST(SchedulerPrefixTest, PreemptedSequenceRecomputesOnlyWhatWasEvicted) {
  Driver d(MakeConfig(4, 64), /*num_pages=*/5);
  ASSERT_TRUE(d.Add(SeqWithPrompt(1, Prompt(8, 1), 5)).ok());
  ASSERT_TRUE(d.Add(SeqWithPrompt(2, Prompt(8, 2), 12)).ok());
  int32_t readmit_start = -1;
  for (int i = 0; i < 200 && !d.sched().idle(); ++i) {
    const bool was_waiting = d.seq(2) != nullptr && d.seq(2)->state == SequenceState::kWaiting &&
                             d.seq(2)->num_preemptions > 0;
    const std::vector<ItemRecord> step = d.Step();
    const ItemRecord* r = FirstItemOf(step, 2);
    if (was_waiting && r != nullptr && readmit_start < 0) readmit_start = r->start_pos;
  }
  ASSERT_TRUE(d.sched().idle());
  EXPECT_GT(d.sched().num_preemptions(), 0u);
  EXPECT_GT(readmit_start, 0) << "the preempted sequence found none of its pages";
  EXPECT_EQ(readmit_start % 4, 0);
  for (const auto& seq : d.finished()) {
    const std::vector<int32_t> out(seq->tokens.begin() + 8, seq->tokens.end());
    EXPECT_EQ(out, ExpectedOutput(seq->id, seq->params.max_tokens)) << "seq " << seq->id;
    if (seq->id == 2) {
      // Its first admission hit nothing; Complete's cached_tokens is the re-admission's hits,
      // of its 8 prompt tokens at most (the rest of the hit is its own generated tokens).
      EXPECT_EQ(seq->num_cached_tokens, std::min(readmit_start, 8));
    }
  }
  EXPECT_EQ(d.pool().num_free(), d.pool().num_pages());
}

TEST(SchedulerPrefixTest, TurnedOffCachesNothing) {
  SchedulerConfig config = MakeConfig(4, 64);
  config.prefix_caching = false;
  Driver d(config, 16);
  const std::vector<int32_t> prompt = Prompt(10, 77);
  ASSERT_TRUE(d.Add(SeqWithPrompt(1, prompt, 3)).ok());
  RunUntilIdle(&d);
  EXPECT_EQ(d.pool().num_cached(), 0);
  EXPECT_EQ(d.pool().num_evictable(), 0);
  ASSERT_TRUE(d.Add(SeqWithPrompt(2, prompt, 3)).ok());
  const std::vector<ItemRecord> step = d.Step();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start_pos, 0);
  EXPECT_EQ(d.sched().prefix_cache_queries(), 0u);
  EXPECT_EQ(d.sched().prefix_cache_hits(), 0u);
  EXPECT_EQ(d.seq(2)->num_cached_tokens, 0);
}

TEST(SchedulerPrefixTest, OtherSaltMisses) {
  SchedulerConfig config = MakeConfig(4, 64);
  PagePool pool(16);
  const std::vector<int32_t> prompt = Prompt(10, 77);
  {
    config.prefix_cache_salt = 1;
    Scheduler s(config, &pool);
    ASSERT_TRUE(s.Add(SeqWithPrompt(1, prompt, 1)).ok());
    ScheduledBatch b = s.Schedule(absl::UnixEpoch(), nullptr);
    s.CommitStep(b, {0});
    ASSERT_NE(s.Finish(1), nullptr);
  }
  config.prefix_cache_salt = 2;
  Scheduler s(config, &pool);
  ASSERT_TRUE(s.Add(SeqWithPrompt(2, prompt, 1)).ok());
  ScheduledBatch b = s.Schedule(absl::UnixEpoch(), nullptr);
  ASSERT_EQ(b.items.size(), 1u);
  EXPECT_EQ(b.items[0].start_pos, 0);
  s.CommitStep(b, {0});
  ASSERT_NE(s.Finish(2), nullptr);
}

}  // namespace
}  // namespace pkv
