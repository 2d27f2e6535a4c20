// Exact log-sum-exp merge of a (row, kv head)'s partial attention states, shared by the attention
// kernel (the last split to finish merges in place) and the separate merge kernel.
//
// Split s of G query heads left o_s (normalised output, fp32) and lse_s (log2 units). With
// M = max_s lse_s and w_s = 2^(lse_s - M):  o = sum_s w_s o_s / sum_s w_s,  lse = M + log2(sum w).
// Empty splits have lse_s = -inf: weight 0 and their o_s (never written) is not read. If every
// split is empty the output is 0 and the LSE -inf, with no NaN on the way.
#pragma once

#include <cstdint>

#include "kernels/decode/decode_params.h"
#include "kernels/decode/device_util.cuh"

namespace pkv::decode::dev {

constexpr float kLn2 = 0.6931471805599453f;

// Dynamic shared memory of the separate merge kernel (MergePair needs none; kept non-zero so the
// launch never passes a zero-byte extern array).
constexpr int kMergeSmemBytes = 16;

// Writes 4 consecutive output elements (d..d+3) of query head kv_head*G + h of `row`, given the
// normalised output and the head's LSE in log2 units (-inf: nothing was read).
template <int kD, typename T>
__device__ __forceinline__ void WriteOutput(const DecodeParams& p, int row, int kv_head, int h,
                                            int d, float4 v, float lse2) {
  const int64_t qh = static_cast<int64_t>(row) * p.num_q_heads + kv_head * p.group + h;
  Store4<T>(static_cast<T*>(p.out) + qh * kD + d, v);
  if (d == 0 && p.lse != nullptr) p.lse[qh] = lse2 == NegInf() ? lse2 : lse2 * kLn2;
}

// Run by a whole CTA. Each thread owns 4 output elements of one head and folds the splits in with
// an online (rescaling) log-sum-exp, so the loads of several splits are in flight at once (one
// L2 round trip per 4 splits on the critical path of small cells). Reads the partials with
// ld.global.cg: other CTAs wrote them and L1 is not coherent. An empty split's output is loaded
// (it lies inside the workspace) but gets weight 0 and is never multiplied in. `smem` is unused;
// kept so callers need not care which merge variant runs.
template <int kD, typename T>
__device__ void MergePair(const DecodeParams& p, int row, int kv_head, int first, int n,
                          float* /*smem*/) {
  const int g = p.group;
  constexpr int kVec = kD / 4;
  for (int e = threadIdx.x; e < g * kVec; e += blockDim.x) {
    const int h = e / kVec, d = (e - h * kVec) * 4;
    const float* lse_p = p.partial_lse + static_cast<int64_t>(first) * g + h;
    const float* o_p = p.partial_o + (static_cast<int64_t>(first) * g + h) * kD + d;
    float m = NegInf(), l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int s = 0; s < n; ++s) {
      const float lse = __ldcg(lse_p + static_cast<int64_t>(s) * g);
      const float4 o = __ldcg(reinterpret_cast<const float4*>(o_p + static_cast<int64_t>(s) * g * kD));
      if (lse != NegInf()) {
        const float m_new = fmaxf(m, lse);
        const float a = Exp2(m - m_new);  // 0 while m is -inf
        const float w = Exp2(lse - m_new);
        acc.x = acc.x * a + w * o.x;
        acc.y = acc.y * a + w * o.y;
        acc.z = acc.z * a + w * o.z;
        acc.w = acc.w * a + w * o.w;
        l = l * a + w;
        m = m_new;
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float4 v = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    WriteOutput<kD, T>(p, row, kv_head, h, d, v, l > 0.f ? m + __log2f(l) : NegInf());
  }
}

// Separate merge launch: CTA i merges merge entries first + i, first + i + gridDim.x, ...
template <int kD, typename T>
__global__ void __launch_bounds__(128) DecodeMergeKernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(16) float merge_smem[];
  const int count = p.count_from_header ? p.header[2] : p.count;
  for (int i = blockIdx.x; i < count; i += gridDim.x) {
    const MergeEntry e = p.merges[p.first + i];
    MergePair<kD, T>(p, e.row, e.kv_head, e.first_partial, e.num_splits, merge_smem);
    __syncthreads();
  }
}

}  // namespace pkv::decode::dev
