#include "kernels/prefill/prefill_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::prefill {

absl::Status ValidatePrefillRow(const PrefillRow& row, size_t r) {
  if (row.num_tokens < 1 || row.start_pos < 0 || row.q_begin < 0 || row.page_base < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill row ", r, ": num_tokens ", row.num_tokens, ", start_pos ",
                     row.start_pos, ", q_begin ", row.q_begin, ", page_base ", row.page_base));
  }
  return absl::OkStatus();
}

PrefillTile WholeTile(const PrefillRow& row, int32_t m) {
  PrefillTile t;
  t.q_begin = row.q_begin;
  t.num_tokens = row.num_tokens;
  t.start_pos = row.start_pos;
  t.page_base = row.page_base;
  t.m_begin = m;
  return t;
}

int64_t TileKeys(const PrefillTile& tile) {
  return int64_t{tile.start_pos} + std::min(tile.m_begin + kPrefillBlockM, tile.num_tokens);
}

absl::Status PlanPrefillTiles(absl::Span<const PrefillRow> rows, std::vector<PrefillTile>* tiles) {
  tiles->clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    const PrefillRow& row = rows[r];
    PKV_RETURN_IF_ERROR(ValidatePrefillRow(row, r));
    for (int32_t m = 0; m < row.num_tokens; m += kPrefillBlockM) {
      tiles->push_back(WholeTile(row, m));
    }
  }
  // Heaviest first; stable so equal tiles keep row and query order (deterministic plans).
  std::stable_sort(tiles->begin(), tiles->end(), [](const PrefillTile& a, const PrefillTile& b) {
    return TileKeys(a) > TileKeys(b);
  });
  return absl::OkStatus();
}

double PrefillAttentionFlops(absl::Span<const PrefillRow> rows, int32_t num_q_heads,
                             int32_t head_dim) {
  double pairs = 0.0;  // (query, key) pairs attended
  for (const PrefillRow& r : rows) {
    // Query i attends start_pos + i + 1 keys.
    pairs += static_cast<double>(r.num_tokens) * r.start_pos +
             static_cast<double>(r.num_tokens) * (r.num_tokens + 1) / 2.0;
  }
  return pairs * num_q_heads * head_dim * 4.0;  // 2 matmuls x 2 FLOPs per multiply-add
}

}  // namespace pkv::prefill
