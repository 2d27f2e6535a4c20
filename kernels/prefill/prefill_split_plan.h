// Host planning of the prefill kernel's split tiles (prefill_attention.cuh, kSplit): the
// deterministic mode's split-KV attention, for prefill and decode rows alike. Plain C++ (the
// split-size rule is also compiled for the device: the merge kernel counts a query's splits).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/common/host_device.h"
#include "kernels/prefill/prefill_plan.h"

namespace pkv::prefill {

// Split attention at fixed key positions (issue 14: the deterministic mode's way to split-KV).
// Query q at position pos (it sees keys 0..pos) cuts its keys at multiples of a split size C(pos)
// that depends on pos alone: C = max(min_split_tokens, pow2ceil(pos + 1) / max_splits), so it has
// S(pos) = pos / C + 1 <= max_splits splits. Each split's online-softmax state (O unnormalized,
// running max m in log2 units, sum l) is computed from the split's first key with a fresh state
// and written to a partial slot [token][q head][max_splits]; one merge kernel folds a query's
// slots in split order. So a query's output is a function of its position and its keys only: the
// same bits whether it is a decode row (a one-query tile) or one query of a 64-query prefill tile,
// whatever chunk, batch or tile it lands in (a row's arithmetic in the kernel never involves the
// tile's other rows), while a decode row still gets S(pos) CTAs per q head instead of one.
struct PrefillSplitRule {
  int32_t min_split_tokens = 256;  // a power of two >= kPrefillBlockN
  int32_t max_splits = 16;         // a power of two in [1, 128]
  // Query heads a KV head (H_q / H_kv): a split tile's rows pack them, so it holds at most
  // kPrefillBlockM / group queries (prefill_attention.cuh).
  int32_t group = 1;
  int32_t queries_per_tile() const { return kPrefillBlockM / group; }
};

PKV_HOST_DEVICE int32_t PrefillSplitTokens(int32_t pos, int32_t min_split_tokens,
                                           int32_t max_splits) {
  int64_t p2 = 1;
  while (p2 < int64_t{pos} + 1) p2 <<= 1;
  const int64_t c = p2 / max_splits;
  return static_cast<int32_t>(c > min_split_tokens ? c : min_split_tokens);
}
PKV_HOST_DEVICE int32_t PrefillSplitCount(int32_t pos, int32_t min_split_tokens,
                                          int32_t max_splits) {
  return pos / PrefillSplitTokens(pos, min_split_tokens, max_splits) + 1;
}

// INVALID_ARGUMENT unless min_split_tokens is a power of two >= kPrefillBlockN, max_splits a
// power of two in [1, 128] and group in [1, kPrefillBlockM].
absl::Status ValidatePrefillSplitRule(const PrefillSplitRule& rule);

// The split tiles of `rows`: each row's queries in runs of at most rule.queries_per_tile() that
// share one C(pos) (a run never crosses a power of two where C doubles), one tile per run and
// split k <= (the run's last position) / C. Heaviest first, as PlanPrefillTiles. INVALID_ARGUMENT
// as PlanPrefillTiles, or for an invalid rule.
absl::Status PlanSplitPrefillTiles(absl::Span<const PrefillRow> rows, const PrefillSplitRule& rule,
                                   std::vector<PrefillTile>* tiles);

// A step's split tiles in windows of at most `window_tokens` consecutive tokens, so one workspace
// of partial slots for window_tokens tokens serves the whole step (window by window: the tiles,
// then the merge): tiles [tile_begin, tile_begin + num_tiles) hold exactly the queries of tokens
// [token_begin, token_begin + num_tokens), whose slots are counted from token_begin.
struct PrefillSplitWindow {
  int32_t tile_begin = 0;
  int32_t num_tiles = 0;
  int32_t token_begin = 0;
  int32_t num_tokens = 0;
};
// 8B shape (32 q heads, D 128, 16 splits): 68 MB of slots; the 1B's (D 64): 35 MB.
inline constexpr int32_t kPrefillSplitWindowTokens = 256;

// Split tiles of `rows` window by window (rows cut at window edges; a row's queries in any tile
// give the same bits). The rows' tokens must cover [0, T) without overlap; windows cover [0, T).
// INVALID_ARGUMENT as PlanSplitPrefillTiles, for rows that overlap or leave a gap, or a
// window_tokens < 1. `clipped` is scratch.
absl::Status PlanSplitPrefillWindows(absl::Span<const PrefillRow> rows,
                                     const PrefillSplitRule& rule, int32_t window_tokens,
                                     std::vector<PrefillTile>* tiles,
                                     std::vector<PrefillSplitWindow>* windows,
                                     std::vector<PrefillRow>* clipped);

// The fixed layout of a decode-only step (CUDA-graph buckets, whose captured launches need tile
// counts that depend on the row count only): one-query row i (q_begin i) owns tiles
// [i max_splits, (i + 1) max_splits), its splits first, then empty tiles (m_rows 0: the kernel
// returns at once); windows of window_tokens rows. INVALID_ARGUMENT as PlanSplitPrefillWindows,
// or for a row of more than one query.
absl::Status PlanSplitDecodeSlots(absl::Span<const PrefillRow> rows, const PrefillSplitRule& rule,
                                  int32_t window_tokens, std::vector<PrefillTile>* tiles,
                                  std::vector<PrefillSplitWindow>* windows);
// The same layout for `rows` when `tiles` already holds it for a prefix of them (graph padding
// appends rows): plans only rows [tiles->size() / max_splits, rows.size()) and rewrites the
// windows. INVALID_ARGUMENT as PlanSplitDecodeSlots, or when `tiles` is not a whole prefix.
absl::Status ExtendSplitDecodeSlots(absl::Span<const PrefillRow> rows, const PrefillSplitRule& rule,
                                    int32_t window_tokens, std::vector<PrefillTile>* tiles,
                                    std::vector<PrefillSplitWindow>* windows);

// Keys a split tile's CTA reads: [k C, min((k + 1) C, last query's position + 1)).
int64_t SplitTileKeys(const PrefillTile& tile);

// Bytes of the partial slots for `tokens` query tokens: O (head_dim floats) and (m, l) for each
// token, q head and split slot.
int64_t PrefillSplitPartialBytes(int64_t tokens, int32_t num_q_heads, int32_t head_dim,
                                 const PrefillSplitRule& rule);

}  // namespace pkv::prefill
