// Exact log-sum-exp merge of a (row, kv head)'s partial attention states, shared by the attention
// kernel (the last split to finish merges in place) and the separate merge kernel.
//
// Split s of G query heads left o_s (normalised output, fp32) and lse_s (log2 units). With
// M = max_s lse_s and w_s = 2^(lse_s - M):  o = sum_s w_s o_s / sum_s w_s,  lse = M + log2(sum w).
// Empty splits have lse_s = -inf: weight 0 and their o_s (never written) is not read. If every
// split is empty the output is 0 and the LSE -inf, with no NaN on the way.
#pragma once

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/decode/decode_params.h"
#include "kernels/decode/device_util.cuh"

namespace pkv::decode::dev {

constexpr float kLn2 = 0.6931471805599453f;

// Dynamic shared memory of the separate merge kernel: stages up to ~46 KB of partials (e.g. 23
// splits of G = 4, D = 128); larger pairs take MergePair's register path.
constexpr int kMergeSmemBytes = 48 * 1024;

// Writes 4 consecutive output elements (d..d+3) of query head kv_head*G + h of `row`, given the
// normalised output and the head's LSE in log2 units (-inf: nothing was read).
template <int kD, typename T>
__device__ __forceinline__ void WriteOutput(const DecodeParams& p, int row, int kv_head, int h,
                                            int d, float4 v, float lse2) {
  const int64_t qh = static_cast<int64_t>(row) * p.num_q_heads + kv_head * p.group + h;
  Store4<T>(static_cast<T*>(p.out) + qh * kD + d, v);
  if (d == 0 && p.lse != nullptr) p.lse[qh] = lse2 == NegInf() ? lse2 : lse2 * kLn2;
}

// Register path (fallback when the partials do not fit in shared memory): each thread folds the
// splits into its 4 elements with an online log-sum-exp, 4 splits' loads in flight at a time.
template <int kD, typename T>
__device__ void MergePairRegisters(const DecodeParams& p, int row, int kv_head, int first, int n) {
  constexpr int kVec = kD / 4;
  const int g = p.group;
  for (int e = threadIdx.x; e < g * kVec; e += blockDim.x) {
    const int h = e / kVec, d = (e - h * kVec) * 4;
    const float* lse_p = p.partial_lse + static_cast<int64_t>(first) * g + h;
    const float* o_p = p.partial_o + (static_cast<int64_t>(first) * g + h) * kD + d;
    float m = NegInf(), l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int s = 0; s < n; ++s) {
      const float lse = __ldcg(lse_p + static_cast<int64_t>(s) * g);
      const float4 o =
          __ldcg(reinterpret_cast<const float4*>(o_p + static_cast<int64_t>(s) * g * kD));
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

// Run by a whole CTA with `smem_bytes` of free shared memory at `smem`; the caller synchronises
// before reusing it. A pair's partial outputs are one contiguous block [n][g][kD] of the
// workspace: when it fits, all of it is staged with 16-byte cp.async.cg (L2, coherent) while the
// LSEs are read (ld.global.cg), so the merge costs one L2 round trip whatever n is; the weights
// and sums then come from shared memory. An empty split's output block is copied (it lies in the
// workspace, possibly never written) but, with weight 0, never used.
// Not inlined: the attention kernel runs at its 128-register cap, and inlining this after the
// main loop perturbs the whole kernel's allocation into spills.
template <int kD, typename T>
__device__ __noinline__ void MergePair(const DecodeParams& p, int row, int kv_head, int first,
                                       int n, uint8_t* smem, int smem_bytes) {
  constexpr int kVec = kD / 4;
  const int g = p.group;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
  const int lse_floats = (n * g + 3) & ~3;  // keeps the staged outputs 16-byte aligned
  const int64_t o_bytes = static_cast<int64_t>(n) * g * kD * 4;
  if ((lse_floats + 2 * kMaxGroupSize) * 4 + o_bytes > smem_bytes) {
    MergePairRegisters<kD, T>(p, row, kv_head, first, n);
    return;
  }
  float* sw = reinterpret_cast<float*>(smem);  // [n][g]: LSE, then weights
  float* sm = sw + lse_floats;                 // [8] max LSE per head
  float* sl = sm + kMaxGroupSize;              // [8] sum of weights per head
  float* so = sl + kMaxGroupSize;              // [n][g][kD] staged outputs
  const char* src =
      reinterpret_cast<const char*>(p.partial_o + static_cast<int64_t>(first) * g * kD);
  const uint32_t dst = SmemAddr(so);
  for (int64_t c = tid; c < o_bytes / 16; c += nt) CpAsync16(dst + c * 16, src + c * 16, true);
  CpAsyncCommit();
  const float* lse_base = p.partial_lse + static_cast<int64_t>(first) * g;
  for (int idx = tid; idx < n * g; idx += nt) sw[idx] = __ldcg(lse_base + idx);
  __syncthreads();
  for (int h = warp; h < g; h += nt >> 5) {
    float m = NegInf();
    for (int s = lane; s < n; s += 32) m = fmaxf(m, sw[s * g + h]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.f;
    for (int s = lane; s < n; s += 32) {
      const float w = m == NegInf() ? 0.f : Exp2(sw[s * g + h] - m);
      sw[s * g + h] = w;
      l += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) {
      sm[h] = m;
      sl[h] = l;
    }
  }
  CpAsyncWait<0>();
  __syncthreads();
  for (int e = tid; e < g * kVec; e += nt) {
    const int h = e / kVec, d = (e - h * kVec) * 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < n; ++s) {
      const float w = sw[s * g + h];
      if (w > 0.f) {
        const float4 o = *reinterpret_cast<const float4*>(so + (s * g + h) * kD + d);
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
  extern __shared__ __align__(16) uint8_t merge_smem[];
  const int count = p.count_from_header ? p.header[2] : p.count;  // the plan: no wait needed
  gpu::PdlWait();  // the partials come from the attention launch before (no early trigger: see
                   // ProcessItem)
  for (int i = blockIdx.x; i < count; i += gridDim.x) {
    const MergeEntry e = p.merges[p.first + i];
    MergePair<kD, T>(p, e.row, e.kv_head, e.first_partial, e.num_splits, merge_smem,
                     kMergeSmemBytes);
    __syncthreads();
  }
}

}  // namespace pkv::decode::dev
