// Scheduler: a waiting sequence whose next uncached prompt page a running sequence is prefilling
// waits for it (SchedulerConfig::prefix_wait_in_flight) instead of computing it too, so a burst
// sharing a cold prompt computes the shared pages once; sequences behind it with other prompts
// are not held up; outputs and the page ledger are unchanged; with the option off every sequence
// computes its own copy.
#include <map>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/scheduler/scheduler_test_util.h"

namespace pkv {
namespace {

using test::Driver;
using test::ExpectedOutput;
using test::ItemRecord;
using test::MakeConfig;

constexpr int32_t kPageSize = 4;
constexpr int32_t kSharedTokens = 12;  // 3 full pages shared by every burst sequence
constexpr int32_t kPromptTokens = 14;  // + 2 tokens of its own

std::unique_ptr<Sequence> SeqWithPrompt(uint64_t id, std::vector<int32_t> prompt,
                                        int32_t max_tokens) {
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->params.max_tokens = max_tokens;
  return seq;
}

std::vector<int32_t> BurstPrompt(uint64_t id) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < kSharedTokens; ++i) p.push_back(test::FakeToken(500, i));
  for (int32_t i = kSharedTokens; i < kPromptTokens; ++i) p.push_back(test::FakeToken(id, i));
  return p;
}

struct BurstRun {
  std::map<uint64_t, int32_t> prompt_tokens_fed;  // per sequence, over all its prefill items
  std::vector<ItemRecord> first_step;
};

// Sequences 1..4 share the cold prompt; 5 has a prompt of its own. All arrive together.
BurstRun RunBurst(bool wait_in_flight, int32_t max_batch_tokens) {
  SchedulerConfig config = MakeConfig(kPageSize, max_batch_tokens);
  config.prefix_wait_in_flight = wait_in_flight;
  Driver d(config, /*num_pages=*/64);
  for (uint64_t id = 1; id <= 4; ++id)
    EXPECT_TRUE(d.Add(SeqWithPrompt(id, BurstPrompt(id), 3)).ok());
  std::vector<int32_t> other;
  for (int32_t i = 0; i < kPromptTokens; ++i) other.push_back(test::FakeToken(900, i));
  EXPECT_TRUE(d.Add(SeqWithPrompt(5, other, 3)).ok());
  BurstRun run;
  for (int i = 0; i < 100 && !d.sched().idle(); ++i) {
    const std::vector<ItemRecord> step = d.Step();
    if (i == 0) run.first_step = step;
    for (const ItemRecord& r : step) {
      if (r.start_pos < kPromptTokens) run.prompt_tokens_fed[r.id] += r.num_new_tokens;
    }
  }
  EXPECT_TRUE(d.sched().idle());
  EXPECT_EQ(d.finished().size(), 5u);
  for (const auto& seq : d.finished()) {
    const std::vector<int32_t> out(seq->tokens.begin() + kPromptTokens, seq->tokens.end());
    EXPECT_EQ(out, ExpectedOutput(seq->id, seq->params.max_tokens)) << "seq " << seq->id;
  }
  EXPECT_EQ(d.pool().num_free(), d.pool().num_pages());
  return run;
}

bool Contains(const std::vector<ItemRecord>& items, uint64_t id) {
  for (const ItemRecord& r : items)
    if (r.id == id) return true;
  return false;
}

TEST(SchedulerInFlightPrefixTest, BurstComputesTheSharedPagesOnce) {
  const BurstRun run = RunBurst(/*wait_in_flight=*/true, /*max_batch_tokens=*/64);
  // Step 1: the leader and the unrelated sequence behind the waiting ones; not the followers.
  EXPECT_TRUE(Contains(run.first_step, 1));
  EXPECT_TRUE(Contains(run.first_step, 5));
  for (uint64_t id = 2; id <= 4; ++id) EXPECT_FALSE(Contains(run.first_step, id)) << id;
  EXPECT_EQ(run.prompt_tokens_fed.at(1), kPromptTokens);
  EXPECT_EQ(run.prompt_tokens_fed.at(5), kPromptTokens);
  for (uint64_t id = 2; id <= 4; ++id) {
    EXPECT_EQ(run.prompt_tokens_fed.at(id), kPromptTokens - kSharedTokens) << "seq " << id;
  }
}

TEST(SchedulerInFlightPrefixTest, FollowersTrailAChunkedLeader) {
  // 8 tokens a step: the leader's prompt takes two chunks; the followers wait through both.
  const BurstRun run = RunBurst(/*wait_in_flight=*/true, /*max_batch_tokens=*/8);
  EXPECT_EQ(run.prompt_tokens_fed.at(1), kPromptTokens);
  for (uint64_t id = 2; id <= 4; ++id) {
    EXPECT_EQ(run.prompt_tokens_fed.at(id), kPromptTokens - kSharedTokens) << "seq " << id;
  }
}

TEST(SchedulerInFlightPrefixTest, TurnedOffEverySequenceComputesItsOwnCopy) {
  const BurstRun run = RunBurst(/*wait_in_flight=*/false, /*max_batch_tokens=*/64);
  for (uint64_t id = 1; id <= 5; ++id) {
    EXPECT_TRUE(Contains(run.first_step, id)) << id;
    EXPECT_EQ(run.prompt_tokens_fed.at(id), kPromptTokens) << "seq " << id;
  }
}

}  // namespace
}  // namespace pkv
