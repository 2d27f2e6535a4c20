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
// tile, prefill_split_plan.h) [m_begin, m_begin + m_rows). 32 bytes so the device reads it with two
// 16-byte loads.
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

// INVALID_ARGUMENT naming row `index` when it has no tokens or a negative start_pos, q_begin or
// page_base.
absl::Status ValidatePrefillRow(const PrefillRow& row, size_t index);
// The whole tile of `row`'s queries from m_begin (split fields zero).
PrefillTile WholeTile(const PrefillRow& row, int32_t m_begin);

// Multiply-adds of the causal attention of these rows times 2 (QK^T and PV): the FLOPs the
// kernel must do, for reporting rates. Masked halves of diagonal tiles are not counted.
double PrefillAttentionFlops(absl::Span<const PrefillRow> rows, int32_t num_q_heads,
                             int32_t head_dim);

}  // namespace pkv::prefill
