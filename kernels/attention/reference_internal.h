// The loops behind the CPU reference attention (reference.cc, fp8_kv.cc), generic over how a
// cached element becomes a float: a `Kv` reader provides
//   const KvShape& shape() const;
//   float K(int64_t elem_offset) const;  float V(int64_t elem_offset) const;
//   int64_t Offset(page, kv_head, slot) const;   (PagedKvView::Offset)
// Internal to pkv::kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attention/kv_layout.h"
#include "kernels/common/float16.h"

namespace pkv::internal {

// Attention of one query vector (one head) over positions [0, num_keys) of a row.
template <typename T, typename Kv>
void AttendOne(const T* qvec, const Kv& kv, const int32_t* row_pages, int32_t kv_head,
               int32_t num_keys, float scale, float* out, float* lse, std::vector<float>* scores) {
  const int32_t d = kv.shape().head_dim;
  const int32_t ps = kv.shape().page_size;
  std::fill(out, out + d, 0.0f);
  if (num_keys <= 0) {
    if (lse) *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  scores->resize(num_keys);
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t t = 0; t < num_keys; ++t) {
    const int64_t kt = kv.Offset(row_pages[t / ps], kv_head, t % ps);
    float dot = 0.0f;
    for (int32_t i = 0; i < d; ++i) dot += ToFloat(qvec[i]) * kv.K(kt + i);
    (*scores)[t] = dot * scale;
    max_score = std::max(max_score, (*scores)[t]);
  }
  double sum = 0.0;
  for (int32_t t = 0; t < num_keys; ++t) {
    (*scores)[t] = std::exp((*scores)[t] - max_score);
    sum += (*scores)[t];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t t = 0; t < num_keys; ++t) {
    const int64_t vt = kv.Offset(row_pages[t / ps], kv_head, t % ps);
    const float p = (*scores)[t] * inv;
    for (int32_t i = 0; i < d; ++i) out[i] += p * kv.V(vt + i);
  }
  if (lse) *lse = max_score + static_cast<float>(std::log(sum));
}

template <typename T, typename Kv>
void DecodeLoops(const T* q, const Kv& kv, const BlockTableView& table, float scale, float* out,
                 float* lse) {
  const KvShape& s = kv.shape();
  std::vector<float> scores;
  for (int32_t r = 0; r < table.num_rows; ++r) {
    const int32_t* pages = table.page_ids + table.page_indptr[r];
    for (int32_t h = 0; h < s.num_q_heads; ++h) {
      const int64_t idx = static_cast<int64_t>(r) * s.num_q_heads + h;
      AttendOne(q + idx * s.head_dim, kv, pages, h / s.group_size(), table.lengths[r], scale,
                out + idx * s.head_dim, lse ? lse + idx : nullptr, &scores);
    }
  }
}

template <typename T, typename Kv>
void PrefillLoops(const T* q, const int32_t* qo_indptr, const Kv& kv, const BlockTableView& table,
                  float scale, float* out) {
  const KvShape& s = kv.shape();
  std::vector<float> scores;
  for (int32_t r = 0; r < table.num_rows; ++r) {
    const int32_t* pages = table.page_ids + table.page_indptr[r];
    const int32_t n = qo_indptr[r + 1] - qo_indptr[r];
    const int32_t first_pos = table.lengths[r] - n;
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t h = 0; h < s.num_q_heads; ++h) {
        const int64_t idx = (static_cast<int64_t>(qo_indptr[r]) + i) * s.num_q_heads + h;
        AttendOne(q + idx * s.head_dim, kv, pages, h / s.group_size(), first_pos + i + 1, scale,
                  out + idx * s.head_dim, nullptr, &scores);
      }
    }
  }
}

}  // namespace pkv::internal
