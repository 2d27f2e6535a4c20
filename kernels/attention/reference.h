// CPU reference attention over the paged KV layout: the exact oracle every CUDA route and the CPU
// model backend are checked against. Straightforward loops with float accumulation and a two-pass
// softmax (max, then sum): slow, obvious, exact to float rounding.
//
// Element types T: float, Half, BFloat16 (kernels/common/float16.h). Outputs are float.
// The log-sum-exp (LSE) returned here is in natural-log units of the *scaled* scores:
//   lse = log(sum_t exp(scale * q.k_t)).  A row of length 0 gets output 0 and lse = -inf.
// Thread-safety: pure functions of their inputs.
#pragma once

#include <cstdint>

#include "kernels/attention/kv_layout.h"

namespace pkv {

// Decode: one query token per row attends to all lengths[row] cached tokens of its row.
//   q    [num_rows][num_q_heads][head_dim]
//   out  [num_rows][num_q_heads][head_dim]
//   lse  [num_rows][num_q_heads] or nullptr
template <typename T>
void ReferenceDecodeAttention(const T* q, const PagedKvView<const T>& kv,
                              const BlockTableView& table, float scale, float* out, float* lse);

// Causal prefill (also chunked prefill): row r appends qo_indptr[r+1]-qo_indptr[r] new tokens
// whose K/V are already written to the cache at positions lengths[r]-n .. lengths[r]-1; new token
// i (0-based) attends to cached positions 0 .. lengths[r]-n+i.
//   qo_indptr [num_rows + 1]
//   q    [qo_indptr[num_rows]][num_q_heads][head_dim]
//   out  [qo_indptr[num_rows]][num_q_heads][head_dim]
// REQUIRES: 0 < n <= lengths[r] for each row with new tokens.
template <typename T>
void ReferencePrefillAttention(const T* q, const int32_t* qo_indptr, const PagedKvView<const T>& kv,
                               const BlockTableView& table, float scale, float* out);

}  // namespace pkv
