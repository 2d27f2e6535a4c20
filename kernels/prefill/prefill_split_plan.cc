#include "kernels/prefill/prefill_split_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::prefill {

absl::Status ValidatePrefillSplitRule(const PrefillSplitRule& rule) {
  auto pow2 = [](int32_t v) { return v > 0 && (v & (v - 1)) == 0; };
  if (!pow2(rule.min_split_tokens) || rule.min_split_tokens < kPrefillBlockN ||
      !pow2(rule.max_splits) || rule.max_splits > 128 || rule.group < 1 ||
      rule.group > kPrefillBlockM) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefill split rule: min_split_tokens ", rule.min_split_tokens,
        " must be a power of two >= ", kPrefillBlockN, ", max_splits ", rule.max_splits,
        " a power of two in [1, 128] and group ", rule.group, " in [1, ", kPrefillBlockM, "]"));
  }
  return absl::OkStatus();
}

int64_t SplitTileKeys(const PrefillTile& tile) {
  const int64_t begin = int64_t{tile.split} * tile.split_tokens;
  const int64_t end = std::min<int64_t>(begin + tile.split_tokens,
                                        int64_t{tile.start_pos} + tile.m_begin + tile.m_rows);
  return end - begin;
}

absl::Status PlanSplitPrefillTiles(absl::Span<const PrefillRow> rows, const PrefillSplitRule& rule,
                                   std::vector<PrefillTile>* tiles) {
  PKV_RETURN_IF_ERROR(ValidatePrefillSplitRule(rule));
  tiles->clear();
  const auto c_of = [&](int32_t pos) {
    return PrefillSplitTokens(pos, rule.min_split_tokens, rule.max_splits);
  };
  for (size_t r = 0; r < rows.size(); ++r) {
    const PrefillRow& row = rows[r];
    PKV_RETURN_IF_ERROR(ValidatePrefillRow(row, r));
    for (int32_t m = 0; m < row.num_tokens;) {
      const int32_t c = c_of(row.start_pos + m);
      int32_t n = 1;  // the run: queries sharing c, at most a tile
      while (n < rule.queries_per_tile() && m + n < row.num_tokens &&
             c_of(row.start_pos + m + n) == c) {
        ++n;
      }
      const int32_t last_pos = row.start_pos + m + n - 1;
      for (int32_t k = 0; k <= last_pos / c; ++k) {
        PrefillTile t = WholeTile(row, m);
        t.split_tokens = c;
        t.split = k;
        t.m_rows = n;
        tiles->push_back(t);
      }
      m += n;
    }
  }
  std::stable_sort(tiles->begin(), tiles->end(), [](const PrefillTile& a, const PrefillTile& b) {
    return SplitTileKeys(a) > SplitTileKeys(b);
  });
  return absl::OkStatus();
}

absl::Status PlanSplitPrefillWindows(absl::Span<const PrefillRow> rows,
                                     const PrefillSplitRule& rule, int32_t window_tokens,
                                     std::vector<PrefillTile>* tiles,
                                     std::vector<PrefillSplitWindow>* windows,
                                     std::vector<PrefillRow>* clipped) {
  tiles->clear();
  windows->clear();
  if (window_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("split window of ", window_tokens, " tokens"));
  }
  int32_t total = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    PKV_RETURN_IF_ERROR(ValidatePrefillRow(rows[r], r));
    if (rows[r].q_begin != total) {
      return absl::InvalidArgumentError(absl::StrCat("split windows: row ", r, " starts at token ",
                                                     rows[r].q_begin, ", expected ", total));
    }
    total += rows[r].num_tokens;
  }
  std::vector<PrefillTile> window_tiles;
  size_t first_row = 0;  // the first row not wholly before the window
  for (int32_t a = 0; a < total; a += window_tokens) {
    const int32_t b = std::min(total, a + window_tokens);
    clipped->clear();
    while (rows[first_row].q_begin + rows[first_row].num_tokens <= a) ++first_row;
    for (size_t r = first_row; r < rows.size() && rows[r].q_begin < b; ++r) {
      const PrefillRow& row = rows[r];
      const int32_t lo = std::max(a, row.q_begin), hi = std::min(b, row.q_begin + row.num_tokens);
      clipped->push_back({lo, hi - lo, row.start_pos + (lo - row.q_begin), row.page_base});
    }
    PKV_RETURN_IF_ERROR(PlanSplitPrefillTiles(*clipped, rule, &window_tiles));
    windows->push_back(
        {static_cast<int32_t>(tiles->size()), static_cast<int32_t>(window_tiles.size()), a, b - a});
    tiles->insert(tiles->end(), window_tiles.begin(), window_tiles.end());
  }
  return absl::OkStatus();
}

absl::Status PlanSplitDecodeSlots(absl::Span<const PrefillRow> rows, const PrefillSplitRule& rule,
                                  int32_t window_tokens, std::vector<PrefillTile>* tiles,
                                  std::vector<PrefillSplitWindow>* windows) {
  tiles->clear();
  return ExtendSplitDecodeSlots(rows, rule, window_tokens, tiles, windows);
}

absl::Status ExtendSplitDecodeSlots(absl::Span<const PrefillRow> rows, const PrefillSplitRule& rule,
                                    int32_t window_tokens, std::vector<PrefillTile>* tiles,
                                    std::vector<PrefillSplitWindow>* windows) {
  PKV_RETURN_IF_ERROR(ValidatePrefillSplitRule(rule));
  windows->clear();
  if (window_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("split window of ", window_tokens, " tokens"));
  }
  const int32_t n = static_cast<int32_t>(rows.size()), slots = rule.max_splits;
  const int64_t planned = static_cast<int64_t>(tiles->size());
  if (planned % slots != 0 || planned / slots > n) {
    return absl::InvalidArgumentError(absl::StrCat("decode slots: ", planned,
                                                   " tiles are not the slots of a prefix of ", n,
                                                   " rows (", slots, " a row)"));
  }
  for (int32_t i = static_cast<int32_t>(planned / slots); i < n; ++i) {
    const PrefillRow& row = rows[i];
    PKV_RETURN_IF_ERROR(ValidatePrefillRow(row, i));
    if (row.num_tokens != 1 || row.q_begin != i) {
      return absl::InvalidArgumentError(absl::StrCat("decode slots: row ", i, " feeds ",
                                                     row.num_tokens, " tokens from token ",
                                                     row.q_begin, ", expected 1 from ", i));
    }
    const int32_t c = PrefillSplitTokens(row.start_pos, rule.min_split_tokens, slots);
    const int32_t splits = row.start_pos / c + 1;
    for (int32_t k = 0; k < slots; ++k) {
      PrefillTile t = WholeTile(row, 0);
      t.split_tokens = c;
      t.split = k < splits ? k : 0;
      t.m_rows = k < splits ? 1 : 0;
      tiles->push_back(t);
    }
  }
  for (int32_t a = 0; a < n; a += window_tokens) {
    const int32_t b = std::min(n, a + window_tokens);
    windows->push_back({a * slots, (b - a) * slots, a, b - a});
  }
  return absl::OkStatus();
}

int64_t PrefillSplitPartialBytes(int64_t tokens, int32_t num_q_heads, int32_t head_dim,
                                 const PrefillSplitRule& rule) {
  return tokens * num_q_heads * rule.max_splits * (int64_t{head_dim} + 2) * 4;
}

}  // namespace pkv::prefill
