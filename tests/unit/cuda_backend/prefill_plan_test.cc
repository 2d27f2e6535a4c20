// The prefill-attention tile planner: tiles cover every query of every row exactly once, carry
// their row's description, come heaviest first, and the FLOP count matches a brute-force count.
#include "kernels/prefill/prefill_plan.h"

#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::prefill {
namespace {

TEST(PrefillPlanTest, TilesCoverEveryQueryOnceHeaviestFirst) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<PrefillRow> rows;
    int32_t q = 0, pages = 0;
    const int n_rows = 1 + static_cast<int>(rng() % 6);
    for (int r = 0; r < n_rows; ++r) {
      const int32_t n = 1 + static_cast<int32_t>(rng() % 300);
      const int32_t start = static_cast<int32_t>(rng() % 500);
      rows.push_back({q, n, start, pages});
      q += n;
      pages += (start + n + 15) / 16;
    }
    std::vector<PrefillTile> tiles;
    ASSERT_TRUE(PlanPrefillTiles(rows, &tiles).ok());
    std::map<int32_t, int32_t> seen;  // query index -> times covered
    for (size_t i = 0; i < tiles.size(); ++i) {
      const PrefillTile& t = tiles[i];
      if (i > 0) {
        EXPECT_GE(TileKeys(tiles[i - 1]), TileKeys(t));
      }
      EXPECT_EQ(t.m_begin % kPrefillBlockM, 0);
      EXPECT_LT(t.m_begin, t.num_tokens);
      bool found = false;
      for (const PrefillRow& r : rows) {
        found |= r.q_begin == t.q_begin && r.num_tokens == t.num_tokens &&
                 r.start_pos == t.start_pos && r.page_base == t.page_base;
      }
      EXPECT_TRUE(found);
      for (int32_t m = t.m_begin; m < std::min(t.m_begin + kPrefillBlockM, t.num_tokens); ++m) {
        ++seen[t.q_begin + m];
      }
    }
    ASSERT_EQ(static_cast<int32_t>(seen.size()), q);
    for (auto [query, times] : seen) EXPECT_EQ(times, 1) << query;
  }
}

TEST(PrefillPlanTest, FlopsMatchBruteForce) {
  const std::vector<PrefillRow> rows = {{0, 5, 0, 0}, {5, 64, 100, 1}, {69, 1, 7, 9}};
  double pairs = 0;
  for (const PrefillRow& r : rows) {
    for (int32_t i = 0; i < r.num_tokens; ++i) pairs += r.start_pos + i + 1;
  }
  EXPECT_DOUBLE_EQ(PrefillAttentionFlops(rows, 8, 128), pairs * 8 * 128 * 4);
}

TEST(PrefillPlanTest, RejectsBadRows) {
  std::vector<PrefillTile> tiles;
  EXPECT_FALSE(PlanPrefillTiles({{0, 0, 0, 0}}, &tiles).ok());
  EXPECT_FALSE(PlanPrefillTiles({{0, 3, -1, 0}}, &tiles).ok());
  EXPECT_FALSE(PlanPrefillTiles({{-2, 3, 0, 0}}, &tiles).ok());
}

}  // namespace
}  // namespace pkv::prefill
