// The prefill-attention tile planner: tiles cover every query of every row exactly once, carry
// their row's description, come heaviest first, and the FLOP count matches a brute-force count.
#include "kernels/prefill/prefill_plan.h"

#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/prefill/prefill_split_plan.h"

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

TEST(PrefillSplitTest, SplitSizeDependsOnPositionOnly) {
  // min 256, at most 16 splits: C = 256 up to 4096 keys, then doubles with each power of two.
  EXPECT_EQ(PrefillSplitTokens(0, 256, 16), 256);
  EXPECT_EQ(PrefillSplitTokens(4095, 256, 16), 256);  // 4096 keys: 16 splits of 256
  EXPECT_EQ(PrefillSplitCount(4095, 256, 16), 16);
  EXPECT_EQ(PrefillSplitTokens(4096, 256, 16), 512);  // 4097 keys
  EXPECT_EQ(PrefillSplitCount(4096, 256, 16), 9);
  EXPECT_EQ(PrefillSplitCount(255, 256, 16), 1);
  EXPECT_EQ(PrefillSplitCount(256, 256, 16), 2);
  for (int32_t pos : {0, 1, 63, 64, 1000, 4095, 4096, 9999, 131071, 131072, 2000000000}) {
    const int32_t c = PrefillSplitTokens(pos, 256, 16);
    EXPECT_EQ(c % kPrefillBlockN, 0) << pos;
    EXPECT_LE(PrefillSplitCount(pos, 256, 16), 16) << pos;
    EXPECT_GE(int64_t{c} * PrefillSplitCount(pos, 256, 16), int64_t{pos} + 1) << pos;
  }
}

TEST(PrefillSplitTest, RejectsBadRules) {
  std::vector<PrefillTile> tiles;
  EXPECT_FALSE(PlanSplitPrefillTiles({{0, 3, 0, 0}}, {100, 16}, &tiles).ok());
  EXPECT_FALSE(PlanSplitPrefillTiles({{0, 3, 0, 0}}, {32, 16}, &tiles).ok());
  EXPECT_FALSE(PlanSplitPrefillTiles({{0, 3, 0, 0}}, {256, 12}, &tiles).ok());
  EXPECT_FALSE(PlanSplitPrefillTiles({{0, 3, 0, 0}}, {256, 256}, &tiles).ok());
  EXPECT_FALSE(PlanSplitPrefillTiles({{0, 0, 0, 0}}, {256, 16}, &tiles).ok());
}

// Every query gets exactly its splits 0..S(pos)-1, from tiles whose split size is its C(pos),
// whatever the chunking: the (query position, split, C) computations of a 5000-token row are the
// same set planned whole, in chunks of 700, as 5000 decode rows, or mixed with other rows.
TEST(PrefillSplitTest, EveryQueryGetsItsSplitsOnceWhateverTheChunking) {
  const PrefillSplitRule rule{64, 4};  // small, so classes change often: C doubles past 256
  auto computations = [&](const std::vector<PrefillRow>& rows) {
    std::vector<PrefillTile> tiles;
    EXPECT_TRUE(PlanSplitPrefillTiles(rows, rule, &tiles).ok());
    std::map<std::tuple<int32_t, int32_t, int32_t>, int> seen;  // (pos, k, C) -> times
    for (const PrefillTile& t : tiles) {
      EXPECT_GT(t.m_rows, 0);
      EXPECT_LE(t.m_rows, kPrefillBlockM);
      EXPECT_LE(t.m_begin + t.m_rows, t.num_tokens);
      EXPECT_GT(SplitTileKeys(t), 0);
      for (int32_t r = 0; r < t.m_rows; ++r) {
        const int32_t pos = t.start_pos + t.m_begin + r;
        EXPECT_EQ(PrefillSplitTokens(pos, rule.min_split_tokens, rule.max_splits),
                  t.split_tokens);  // a tile's queries share C
        if (pos >= t.split * t.split_tokens) ++seen[{pos, t.split, t.split_tokens}];
      }
    }
    return seen;
  };
  const int32_t n = 5000;
  const auto whole = computations({{0, n, 0, 0}});
  int64_t expected = 0;
  for (int32_t pos = 0; pos < n; ++pos) {
    expected += PrefillSplitCount(pos, rule.min_split_tokens, rule.max_splits);
  }
  EXPECT_EQ(static_cast<int64_t>(whole.size()), expected);
  for (const auto& [key, times] : whole) EXPECT_EQ(times, 1);
  std::vector<PrefillRow> chunks, decode_rows;
  for (int32_t s = 0; s < n; s += 700) chunks.push_back({s, std::min(700, n - s), s, 0});
  for (int32_t pos = 0; pos < n; ++pos) decode_rows.push_back({pos, 1, pos, 0});
  EXPECT_EQ(computations(chunks), whole);
  EXPECT_EQ(computations(decode_rows), whole);
  std::vector<PrefillRow> mixed = chunks;
  mixed.push_back({n, 3, 10, 1});  // another row's queries
  auto with_other = computations(mixed);
  for (int32_t pos = 10; pos < 13; ++pos) {
    for (int32_t k = 0; k < PrefillSplitCount(pos, rule.min_split_tokens, rule.max_splits); ++k) {
      const auto key =
          std::make_tuple(pos, k, PrefillSplitTokens(pos, rule.min_split_tokens, rule.max_splits));
      ASSERT_EQ(with_other[key], 2);  // once in each row
      with_other[key] = 1;
    }
  }
  EXPECT_EQ(with_other, whole);
}

// Windows: each window's tiles hold exactly its tokens' queries (slot rows counted from the
// window's first token), every query gets its splits once, and a row cut at a window edge gives
// the same (position, split, C) computations as planned whole.
TEST(PrefillSplitTest, WindowsHoldTheirOwnTokensAndChangeNoComputation) {
  const PrefillSplitRule rule{64, 4};
  const std::vector<PrefillRow> rows = {
      {0, 1, 500, 0}, {1, 1, 3, 4}, {2, 300, 0, 7}, {302, 90, 700, 9}, {392, 1, 4095, 2}};
  std::vector<PrefillTile> tiles;
  std::vector<PrefillSplitWindow> windows;
  std::vector<PrefillRow> scratch;
  ASSERT_TRUE(PlanSplitPrefillWindows(rows, rule, 100, &tiles, &windows, &scratch).ok());
  ASSERT_EQ(windows.size(), 4u);                              // 393 tokens in windows of 100
  std::map<std::tuple<int32_t, int32_t, int32_t>, int> seen;  // (token, k, C) -> times
  int32_t next_tile = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const PrefillSplitWindow& win = windows[w];
    EXPECT_EQ(win.token_begin, 100 * static_cast<int32_t>(w));
    EXPECT_EQ(win.num_tokens, std::min(100, 393 - win.token_begin));
    EXPECT_EQ(win.tile_begin, next_tile);
    next_tile += win.num_tiles;
    for (int32_t i = win.tile_begin; i < win.tile_begin + win.num_tiles; ++i) {
      const PrefillTile& t = tiles[i];
      for (int32_t r = 0; r < t.m_rows; ++r) {
        const int32_t token = t.q_begin + t.m_begin + r, pos = t.start_pos + t.m_begin + r;
        EXPECT_GE(token, win.token_begin);
        EXPECT_LT(token, win.token_begin + win.num_tokens);
        if (pos >= t.split * t.split_tokens) ++seen[{token, t.split, t.split_tokens}];
      }
    }
  }
  EXPECT_EQ(next_tile, static_cast<int32_t>(tiles.size()));
  std::vector<PrefillTile> whole;
  ASSERT_TRUE(PlanSplitPrefillTiles(rows, rule, &whole).ok());
  std::map<std::tuple<int32_t, int32_t, int32_t>, int> expected;
  for (const PrefillTile& t : whole) {
    for (int32_t r = 0; r < t.m_rows; ++r) {
      if (t.start_pos + t.m_begin + r >= t.split * t.split_tokens) {
        ++expected[{t.q_begin + t.m_begin + r, t.split, t.split_tokens}];
      }
    }
  }
  EXPECT_EQ(seen, expected);
  // Rows must tile the tokens in order.
  EXPECT_FALSE(PlanSplitPrefillWindows({{1, 2, 0, 0}}, rule, 100, &tiles, &windows, &scratch).ok());
  EXPECT_FALSE(PlanSplitPrefillWindows({{0, 2, 0, 0}}, rule, 0, &tiles, &windows, &scratch).ok());
}

// Decode slots: row i owns tiles [i S, (i + 1) S), its splits then empty tiles; windows of rows.
TEST(PrefillSplitTest, DecodeSlotsAreAFixedLayoutOfTheRowCount) {
  const PrefillSplitRule rule{64, 4};
  const std::vector<PrefillRow> rows = {{0, 1, 0, 0}, {1, 1, 63, 1}, {2, 1, 64, 2}, {3, 1, 300, 3}};
  std::vector<PrefillTile> tiles;
  std::vector<PrefillSplitWindow> windows;
  ASSERT_TRUE(PlanSplitDecodeSlots(rows, rule, 3, &tiles, &windows).ok());
  ASSERT_EQ(tiles.size(), 16u);
  const int32_t splits[] = {1, 1, 2, 3};  // pos 300: C = pow2ceil(301) / 4 = 128
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t s = PrefillSplitCount(rows[i].start_pos, 64, 4);
    EXPECT_EQ(s, splits[i]) << i;
    for (int32_t k = 0; k < 4; ++k) {
      const PrefillTile& t = tiles[4 * i + k];
      EXPECT_EQ(t.q_begin, i);
      EXPECT_EQ(t.m_rows, k < s ? 1 : 0);
      if (k < s) {
        EXPECT_EQ(t.split, k);
      }
      EXPECT_EQ(t.split_tokens, PrefillSplitTokens(rows[i].start_pos, 64, 4));
    }
  }
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].tile_begin, 0);
  EXPECT_EQ(windows[0].num_tiles, 12);
  EXPECT_EQ(windows[1].tile_begin, 12);
  EXPECT_EQ(windows[1].num_tiles, 4);
  EXPECT_EQ(windows[1].token_begin, 3);
  EXPECT_EQ(windows[1].num_tokens, 1);
  EXPECT_FALSE(PlanSplitDecodeSlots({{0, 2, 0, 0}}, rule, 3, &tiles, &windows).ok());
  EXPECT_FALSE(PlanSplitDecodeSlots({{1, 1, 0, 0}}, rule, 3, &tiles, &windows).ok());
}

// Extending the layout of a prefix of the rows (graph padding) gives the whole plan's tiles and
// windows; tiles that are not a whole prefix's slots are refused.
TEST(PrefillSplitTest, DecodeSlotsExtendAPrefixToTheWholePlan) {
  const PrefillSplitRule rule{64, 4};
  const std::vector<PrefillRow> rows = {
      {0, 1, 5, 0}, {1, 1, 700, 1}, {2, 1, 0, 0}, {3, 1, 0, 0}, {4, 1, 0, 0}};
  std::vector<PrefillTile> whole, tiles;
  std::vector<PrefillSplitWindow> whole_windows, windows;
  ASSERT_TRUE(PlanSplitDecodeSlots(rows, rule, 3, &whole, &whole_windows).ok());
  ASSERT_TRUE(
      PlanSplitDecodeSlots(absl::MakeConstSpan(rows).first(2), rule, 3, &tiles, &windows).ok());
  ASSERT_EQ(windows.size(), 1u);
  ASSERT_TRUE(ExtendSplitDecodeSlots(rows, rule, 3, &tiles, &windows).ok());
  ASSERT_EQ(tiles.size(), whole.size());
  for (size_t i = 0; i < tiles.size(); ++i) {
    EXPECT_EQ(tiles[i].q_begin, whole[i].q_begin) << i;
    EXPECT_EQ(tiles[i].start_pos, whole[i].start_pos) << i;
    EXPECT_EQ(tiles[i].split, whole[i].split) << i;
    EXPECT_EQ(tiles[i].split_tokens, whole[i].split_tokens) << i;
    EXPECT_EQ(tiles[i].m_rows, whole[i].m_rows) << i;
  }
  ASSERT_EQ(windows.size(), whole_windows.size());
  for (size_t w = 0; w < windows.size(); ++w) {
    EXPECT_EQ(windows[w].tile_begin, whole_windows[w].tile_begin);
    EXPECT_EQ(windows[w].num_tiles, whole_windows[w].num_tiles);
    EXPECT_EQ(windows[w].token_begin, whole_windows[w].token_begin);
    EXPECT_EQ(windows[w].num_tokens, whole_windows[w].num_tokens);
  }
  tiles.resize(5);  // not a whole row's slots
  EXPECT_FALSE(ExtendSplitDecodeSlots(rows, rule, 3, &tiles, &windows).ok());
  tiles.resize(4 * 6);  // more rows' slots than rows
  EXPECT_FALSE(ExtendSplitDecodeSlots(rows, rule, 3, &tiles, &windows).ok());
}

// A split tile packs a KV head's G query heads into its 64 rows, so it holds at most 64 / G
// queries; the computations are the same set whatever G.
TEST(PrefillSplitTest, TilesHoldAtMost64OverGroupQueries) {
  for (int32_t group : {1, 4, 7, 8}) {
    const PrefillSplitRule rule{64, 4, group};
    std::vector<PrefillTile> tiles;
    ASSERT_TRUE(PlanSplitPrefillTiles({{0, 300, 100, 0}}, rule, &tiles).ok());
    int64_t rows = 0;
    for (const PrefillTile& t : tiles) {
      EXPECT_LE(t.m_rows, kPrefillBlockM / group) << group;
      if (t.split == 0) rows += t.m_rows;
    }
    EXPECT_EQ(rows, 300) << group;  // every query is in exactly one run
  }
  std::vector<PrefillTile> tiles;
  EXPECT_FALSE(PlanSplitPrefillTiles({{0, 3, 0, 0}}, {64, 4, 0}, &tiles).ok());
}

TEST(PrefillSplitTest, PartialBytes) {
  EXPECT_EQ(PrefillSplitPartialBytes(3, 32, 128, {256, 16}), 3 * 32 * 16 * 130 * 4);
}

}  // namespace
}  // namespace pkv::prefill
