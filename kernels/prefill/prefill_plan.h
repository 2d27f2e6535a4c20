// Host planning of the paged causal prefill-attention kernel (prefill_launch.h): the batch's
// prefill rows become a list of query tiles, one CTA per (tile, q head).
//
// A prefill row feeds `num_tokens` query tokens at positions start_pos .. start_pos+num_tokens-1
// (chunked prefill: start_pos > 0 when earlier chunks are already in the cache). Query i attends
// to keys 0 .. start_pos+i of its row, read from the paged cache (kernels/attention/kv_layout.h),
// which already holds this chunk's own K/V (the RoPE kernel writes them first). A tile is
// kPrefillBlockM consecutive queries of one row; its CTA streams keys [0, last query's position]
// in kPrefillBlockN-key tiles.
//
// Tiles are emitted heaviest first (most keys to read), so the long causal tiles start in the
// first wave and the short ones fill the tail; ties keep row order, then query order.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/common/host_device.h"

namespace pkv::prefill {

inline constexpr int32_t kPrefillBlockM = 64;  // queries per tile (4 warps x 16 rows)
inline constexpr int32_t kPrefillBlockN = 64;  // keys per shared-memory tile

// One prefill row of the batch, in the caller's token order.
struct PrefillRow {
  int32_t q_begin = 0;     // index of the row's first query token in q / out
  int32_t num_tokens = 0;  // >= 1
  int32_t start_pos = 0;   // cached tokens before the chunk (>= 0)
  int32_t page_base = 0;   // the row's first entry in the block table's page ids
};

// One CTA's queries: [m_begin, min(m_begin + kPrefillBlockM, num_tokens)) of its row, or (a split
// tile, below) [m_begin, m_begin + m_rows). 32 bytes so the device reads it with two 16-byte loads.
struct PrefillTile {
  int32_t q_begin = 0;
  int32_t num_tokens = 0;
  int32_t start_pos = 0;
  int32_t page_base = 0;
  int32_t m_begin = 0;
  int32_t split_tokens = 0;  // split tiles: C, the split size of every query of the tile; 0: none
  int32_t split = 0;         // split tiles: k, the tile reads keys [k C, (k + 1) C)
  int32_t m_rows = 0;        // split tiles: the tile's queries (<= kPrefillBlockM)
};
static_assert(sizeof(PrefillTile) == 32);

// Keys the tile's CTA reads: start_pos + min(m_begin + kPrefillBlockM, num_tokens).
int64_t TileKeys(const PrefillTile& tile);

// Fills `tiles` (cleared first, capacity reused). INVALID_ARGUMENT for a row with no tokens, a
// negative start_pos, q_begin or page_base.
absl::Status PlanPrefillTiles(absl::Span<const PrefillRow> rows, std::vector<PrefillTile>* tiles);

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
// share one
// C(pos) (a run never crosses a power of two where C doubles), one tile per run and split k <=
// (the run's last position) / C. Heaviest first, as PlanPrefillTiles. INVALID_ARGUMENT as
// PlanPrefillTiles, or for an invalid rule.
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

// Keys a split tile's CTA reads: [k C, min((k + 1) C, last query's position + 1)).
int64_t SplitTileKeys(const PrefillTile& tile);

// Bytes of the partial slots for `tokens` query tokens: O (head_dim floats) and (m, l) for each
// token, q head and split slot.
int64_t PrefillSplitPartialBytes(int64_t tokens, int32_t num_q_heads, int32_t head_dim,
                                 const PrefillSplitRule& rule);

// Multiply-adds of the causal attention of these rows times 2 (QK^T and PV): the FLOPs the
// kernel must do, for reporting rates. Masked halves of diagonal tiles are not counted.
double PrefillAttentionFlops(absl::Span<const PrefillRow> rows, int32_t num_q_heads,
                             int32_t head_dim);

}  // namespace pkv::prefill
