// Prefix-aware placement: the router's prefix index (block keys chained over the prompt, per-worker
// LRU bound), the choice of the worker with the longest likely-cached prefix within the load
// bound, session affinity as a tie-breaker, and a hot shared prefix spreading over the workers.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/placement.h"
#include "router/prefix_index.h"
#include "xxhash.h"

namespace pkv::router {
namespace {

pkv::v1::GenerateRequest TokenPrompt(const std::vector<uint32_t>& ids) {
  pkv::v1::GenerateRequest r;
  for (uint32_t id : ids) r.mutable_token_ids()->add_ids(id);
  return r;
}

std::vector<uint32_t> Ids(int n, uint32_t first) {
  std::vector<uint32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(first + static_cast<uint32_t>(i));
  return v;
}

TEST(PromptBlockHashesTest, FullBlocksOnlyChainedOverThePrefix) {
  const std::vector<uint32_t> ids = Ids(10, 1);
  const std::vector<uint64_t> keys = PromptBlockHashes(TokenPrompt(ids), 4, 64);
  ASSERT_EQ(keys.size(), 2u);  // 10 tokens = 2 full blocks of 4
  // Independent computation of the documented chain (little-endian uint32 ids).
  const uint64_t k0 = XXH3_64bits_withSeed(ids.data(), 16, 0x746f6b656e73ull);
  EXPECT_EQ(keys[0], k0);
  EXPECT_EQ(keys[1], XXH3_64bits_withSeed(ids.data() + 4, 16, k0));
  std::vector<uint32_t> other = ids;
  other[0] = 999;  // changes block 0, and so every key after it
  const std::vector<uint64_t> other_keys = PromptBlockHashes(TokenPrompt(other), 4, 64);
  EXPECT_NE(other_keys[0], keys[0]);
  EXPECT_NE(other_keys[1], keys[1]);
  pkv::v1::GenerateRequest text;
  text.set_text(std::string(130, 'a'));
  EXPECT_EQ(PromptBlockHashes(text, 4, 64).size(), 2u);
}

TEST(PrefixIndexTest, MatchesLeadingBlocksAndForgetsLeastRecentlyUsed) {
  PrefixIndex index(/*max_blocks_per_worker=*/4);
  index.Record(0, {1, 2, 3});
  EXPECT_EQ(index.MatchedBlocks(0, {1, 2, 3, 4}), 3);
  EXPECT_EQ(index.MatchedBlocks(0, {1, 9, 3}), 1) << "a prefix match stops at the first miss";
  EXPECT_EQ(index.MatchedBlocks(1, {1, 2}), 0);
  index.Record(0, {7, 8});  // 5 keys > 4: the least recently used (3, the old tail) goes
  EXPECT_EQ(index.num_blocks(0), 4u);
  EXPECT_EQ(index.MatchedBlocks(0, {1, 2, 3}), 2);
  EXPECT_EQ(index.MatchedBlocks(0, {7, 8}), 2);
}

std::vector<WorkerLoad> Loads(const std::vector<uint64_t>& loads,
                              const std::vector<int32_t>& blocks) {
  std::vector<WorkerLoad> out;
  for (int i = 0; i < static_cast<int>(loads.size()); ++i) {
    out.push_back(WorkerLoad{i, true, loads[i], blocks[i]});
  }
  return out;
}

TEST(PrefixPlacementTest, LoadBoundFollowsTheDocumentedExamples) {
  const PrefixRouting r;
  EXPECT_EQ(PrefixLoadBound(0, r), 4u);
  EXPECT_EQ(PrefixLoadBound(10, r), 24u);
}

TEST(PrefixPlacementTest, LongestPrefixWithinTheLoadBoundWins) {
  std::mt19937_64 rng(1);
  SessionAffinityMap sessions(10);
  auto p = ChoosePlacement("", Loads({0, 3, 1}, {1, 3, 2}), {}, false, sessions, rng);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->worker, 1);
  EXPECT_EQ(p->reason, PlacementReason::kPrefix);
  EXPECT_EQ(p->prefix_blocks, 3);
  // w1 is over the bound (2 * 10 + 4 = 24): w2, the next longest prefix, takes it.
  p = ChoosePlacement("", Loads({10, 30, 12}, {1, 3, 2}), {}, false, sessions, rng);
  EXPECT_EQ(p->worker, 2);
  // Nobody caches anything: plain two choices.
  p = ChoosePlacement("", Loads({5, 0}, {0, 0}), {}, false, sessions, rng);
  EXPECT_EQ(p->worker, 1);
  EXPECT_EQ(p->reason, PlacementReason::kLeastLoaded);
  // Turned off: the prefix is ignored.
  PrefixRouting off;
  off.enabled = false;
  p = ChoosePlacement("", Loads({5, 0}, {4, 0}), {}, false, sessions, rng, off);
  EXPECT_EQ(p->worker, 1);
}

TEST(PrefixPlacementTest, StickySessionWinsAndAPrefixPlacesANewOne) {
  std::mt19937_64 rng(2);
  SessionAffinityMap sessions(10);
  sessions.Set("s", 0);
  // The sticky worker keeps its session even against a longer prefix elsewhere.
  auto p = ChoosePlacement("s", Loads({2, 0}, {1, 3}), {}, false, sessions, rng);
  EXPECT_EQ(p->worker, 0);
  EXPECT_EQ(p->reason, PlacementReason::kAffinity);
  EXPECT_EQ(p->prefix_blocks, 1);
  // A new session goes where its prefix is, and sticks there.
  p = ChoosePlacement("t", Loads({2, 0}, {1, 3}), {}, false, sessions, rng);
  EXPECT_EQ(p->worker, 1);
  EXPECT_EQ(p->reason, PlacementReason::kPrefix);
  EXPECT_EQ(sessions.Lookup("t"), 1);
  // Its worker gone (unplaceable): the session fails over to the longest prefix left.
  std::vector<WorkerLoad> w = Loads({0, 0, 0}, {0, 0, 2});
  w[1].placeable = false;
  p = ChoosePlacement("t", w, {}, false, sessions, rng);
  EXPECT_EQ(p->worker, 2);
  EXPECT_EQ(p->reason, PlacementReason::kFailover);
  // A retry excluding the best worker is a failover to the next.
  p = ChoosePlacement("", Loads({0, 0, 0}, {1, 3, 2}), {1}, true, sessions, rng);
  EXPECT_EQ(p->worker, 2);
  EXPECT_EQ(p->reason, PlacementReason::kFailover);
}

// A hot shared prefix: every request carries the same system prompt. Requests stay open (load
// grows by one per placement). The first worker gets the prefix; once its load passes the bound,
// others are chosen and, warming, join in; the load stays within the bound of the least loaded.
TEST(PrefixPlacementTest, HotSharedPrefixDoesNotPileOnOneWorker) {
  Placer placer(100, /*seed=*/5);
  const std::vector<uint64_t> blocks = PromptBlockHashes(TokenPrompt(Ids(64, 7)), 16, 64);
  std::vector<uint64_t> load(4, 0);
  for (int i = 0; i < 400; ++i) {
    std::vector<WorkerLoad> workers;
    for (int w = 0; w < 4; ++w) workers.push_back(WorkerLoad{w, true, load[w]});
    auto p = placer.Place("", blocks, workers, {}, false);
    ASSERT_TRUE(p.has_value());
    ++load[p->worker];
  }
  const uint64_t min = *std::min_element(load.begin(), load.end());
  const uint64_t max = *std::max_element(load.begin(), load.end());
  EXPECT_GT(min, 0u) << "every worker took part";
  EXPECT_LE(max, PrefixLoadBound(min, PrefixRouting{}) + 1) << max << " vs " << min;
}

TEST(PrefixPlacementTest, PlacerRecordsWhereAPrefixWent) {
  Placer placer(100, 9);
  const auto a = PromptBlockHashes(TokenPrompt(Ids(40, 1)), 16, 64);
  const auto b = PromptBlockHashes(TokenPrompt(Ids(40, 500)), 16, 64);
  std::vector<WorkerLoad> workers = {WorkerLoad{0, true, 0}, WorkerLoad{1, true, 0}};
  const int wa = placer.Place("", a, workers, {}, false)->worker;
  for (int i = 0; i < 20; ++i) {
    auto p = placer.Place("", a, workers, {}, false);
    EXPECT_EQ(p->worker, wa);
    EXPECT_EQ(p->prefix_blocks, 2);
    EXPECT_EQ(p->reason, PlacementReason::kPrefix);
  }
  EXPECT_EQ(placer.Place("", b, workers, {}, false)->prefix_blocks, 0);
}

}  // namespace
}  // namespace pkv::router
