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

// Bytes of shared memory MergePair needs.
constexpr int kMergeSmemBytes = (kMaxSplitsPerPair * kMaxGroupSize + 2 * kMaxGroupSize) * 4;

// Writes 4 consecutive output elements (d..d+3) of query head kv_head*G + h of `row`, given the
// normalised output and the head's LSE in log2 units (-inf: nothing was read).
template <int kD, typename T>
__device__ __forceinline__ void WriteOutput(const DecodeParams& p, int row, int kv_head, int h,
                                            int d, float4 v, float lse2) {
  const int64_t qh = static_cast<int64_t>(row) * p.num_q_heads + kv_head * p.group + h;
  Store4<T>(static_cast<T*>(p.out) + qh * kD + d, v);
  if (d == 0 && p.lse != nullptr) p.lse[qh] = lse2 == NegInf() ? lse2 : lse2 * kLn2;
}

// Run by a whole CTA. `smem` holds at least kMergeSmemBytes; the caller synchronises before
// reusing it. Reads the partials with ld.global.cg: other CTAs wrote them (L1 is not coherent).
template <int kD, typename T>
__device__ void MergePair(const DecodeParams& p, int row, int kv_head, int first, int n,
                          float* smem) {
  const int g = p.group;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
  float* sw = smem;                                  // [n][8]: lse, then weights
  float* sm = smem + kMaxSplitsPerPair * kMaxGroupSize;  // [8] max lse per head
  float* sl = sm + kMaxGroupSize;                        // [8] sum of weights per head
  for (int idx = tid; idx < n * g; idx += nt) {
    const int s = idx / g, h = idx - s * g;
    sw[s * kMaxGroupSize + h] = __ldcg(p.partial_lse + static_cast<int64_t>(first + s) * g + h);
  }
  __syncthreads();
  for (int h = warp; h < g; h += nt >> 5) {
    float m = NegInf();
    for (int s = lane; s < n; s += 32) m = fmaxf(m, sw[s * kMaxGroupSize + h]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.f;
    for (int s = lane; s < n; s += 32) {
      const float x = sw[s * kMaxGroupSize + h];
      const float w = m == NegInf() ? 0.f : Exp2(x - m);
      sw[s * kMaxGroupSize + h] = w;
      l += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) {
      sm[h] = m;
      sl[h] = l;
    }
  }
  __syncthreads();
  constexpr int kVec = kD / 4;
  for (int e = tid; e < g * kVec; e += nt) {
    const int h = e / kVec, d = (e - h * kVec) * 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int s = 0; s < n; ++s) {
      const float w = sw[s * kMaxGroupSize + h];
      if (w > 0.f) {
        const float4 o = __ldcg(reinterpret_cast<const float4*>(
            p.partial_o + (static_cast<int64_t>(first + s) * g + h) * kD + d));
        acc.x += w * o.x;
        acc.y += w * o.y;
        acc.z += w * o.z;
        acc.w += w * o.w;
      }
    }
    const float l = sl[h];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float4 v = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    WriteOutput<kD, T>(p, row, kv_head, h, d, v, l > 0.f ? sm[h] + __log2f(l) : NegInf());
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
