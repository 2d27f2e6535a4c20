// The activation (x) operand of the fused GEMV (gemv_kernel.cuh): token g's 8 inputs at k .. k + 7
// as the 16-bit MMA words lane (g, c) feeds its step, read either from global memory at each step
// (LoadX) or from the CTA's shared-memory copy of its k span (StageX / XSource, gemv_plan.h:
// GemvStageSpan). Both give the same bits: staging changes where the words wait, not their value.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/decode/device_util.cuh"
#include "kernels/model/gemv.h"
#include "kernels/model/gemv_plan.h"

// PKV_GEMV_X_CONST=1 (CMake option of the same name, never in a shipped build): the per-step
// global x loads return a constant instead, and no launch stages x, to time the kernel without
// its activation traffic (bench/NOTES.md, "x staging"). Results are wrong by design.
#ifndef PKV_GEMV_X_CONST
#define PKV_GEMV_X_CONST 0
#endif

namespace pkv::gpu::gemv {

// x words of type From as words of type To (the same values; fp16 from bf16 by way of fp32, exact
// inside fp16's range: a bf16 above 65504 in magnitude becomes inf).
template <typename From, typename To>
__device__ __forceinline__ uint4 XAs(const uint4& v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else {
    static_assert(std::is_same_v<From, __nv_bfloat16> && std::is_same_v<To, __half>);
    auto conv = [](uint32_t w) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
      const __half2 h = __float22half2_rn(f);
      return *reinterpret_cast<const uint32_t*>(&h);
    };
    return make_uint4(conv(v.x), conv(v.y), conv(v.z), conv(v.w));
  }
}

// Token g's 8 inputs at k .. k + 7 as MMA operand words. REQUIRES: g < a.tokens.
template <typename T, GemvInput kIn>
__device__ __forceinline__ uint4 LoadX(const GemvArgs& a, int g, int32_t k, float inv) {
#if PKV_GEMV_X_CONST
  const uint32_t one = decode::dev::PackPair<T>(1.f, 1.f);
  return make_uint4(one, one, one, one);
#else
  if constexpr (kIn == GemvInput::kPlain) {
    const T* x = static_cast<const T*>(a.x) + int64_t{g} * a.plan.k + k;
    return __ldg(reinterpret_cast<const uint4*>(x));
  } else {
    // RMSNorm(x) * w rounded to T, as LaunchAddRmsNorm writes it: (x * inv) * w per element.
    const float* xr = static_cast<const float*>(a.x) + int64_t{g} * a.plan.k + k;
    const float4 x0 = __ldg(reinterpret_cast<const float4*>(xr));
    const float4 x1 = __ldg(reinterpret_cast<const float4*>(xr) + 1);
    const float4 w0 = __ldg(reinterpret_cast<const float4*>(a.norm_weight + k));
    const float4 w1 = __ldg(reinterpret_cast<const float4*>(a.norm_weight + k) + 1);
    uint4 r;
    r.x = decode::dev::PackPair<T>(x0.x * inv * w0.x, x0.y * inv * w0.y);
    r.y = decode::dev::PackPair<T>(x0.z * inv * w0.z, x0.w * inv * w0.w);
    r.z = decode::dev::PackPair<T>(x1.x * inv * w1.x, x1.y * inv * w1.y);
    r.w = decode::dev::PackPair<T>(x1.z * inv * w1.z, x1.w * inv * w1.w);
    return r;
  }
#endif
}

// Copies tokens [0, a.tokens) of x over `span` into xs ([a.tokens][row_vecs] 16-byte words, row t
// word v = x[t][span.begin + 8 v ..]) with every load in flight at once, so the copy costs about
// one memory round trip, not one per K step. The words are stored as S (the MMA's operand type:
// T, or fp16 for FP8 weights under bf16, gemv_kernel.cuh GemvMmaT), so the K loop converts
// nothing. kPlain: cp.async (global -> shared, no registers), then with S != T each thread
// converts the words it copied; kRmsNorm: normalized and rounded to T through registers, then
// converted to S, kLoads vectors in flight per thread. inv: [tokens] (kRmsNorm). REQUIRES:
// called by every thread of the CTA after the dependency wait; the caller synchronises before
// reading xs.
template <typename T, typename S, GemvInput kIn, int kThreads>
__device__ __forceinline__ void StageX(const GemvArgs& a, GemvKSpan span, int32_t row_vecs,
                                       const float* inv, uint4* xs) {
  const int32_t span_vecs = span.len / 8;
  if constexpr (kIn == GemvInput::kPlain) {
    for (int t = 0; t < a.tokens; ++t) {
      const T* src = static_cast<const T*>(a.x) + int64_t{t} * a.plan.k + span.begin;
      for (int32_t e = threadIdx.x; e < span_vecs; e += kThreads) {
        const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(xs + t * row_vecs + e));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src + 8 * e));
      }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    if constexpr (!std::is_same_v<S, T>) {
      for (int t = 0; t < a.tokens; ++t) {
        for (int32_t e = threadIdx.x; e < span_vecs; e += kThreads) {
          xs[t * row_vecs + e] = XAs<T, S>(xs[t * row_vecs + e]);
        }
      }
    }
  } else {
    constexpr int kLoads = 2;  // 16 registers each; 4 spill beside the preloaded weight batch
    const int32_t total = a.tokens * span_vecs;
    for (int32_t base = threadIdx.x; base < total; base += kThreads * kLoads) {
      uint4 v[kLoads];
      int32_t at[kLoads];
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        const int32_t i = base + j * kThreads;
        at[j] = -1;
        if (i < total) {
          const int32_t t = i / span_vecs, e = i - t * span_vecs;
          v[j] = XAs<T, S>(LoadX<T, kIn>(a, t, span.begin + 8 * e, inv[t]));
          at[j] = t * row_vecs + e;
        }
      }
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if (at[j] >= 0) xs[at[j]] = v[j];
      }
    }
  }
}

// Where a lane's x words come from during the K loop: the staged copy (words of S, StageX), or
// global memory (words of T). AtStep(step): lane (g, c)'s words of step `step` (k = 32 step + 8
// c), of type Word; the staged form is one shared-memory read at a constant offset from `row`
// within an unrolled batch.
template <typename T, typename S, GemvInput kIn, bool kStaged>
struct XSource {
  using Word = std::conditional_t<kStaged, S, T>;
  const GemvArgs& a;
  const uint4* row;  // kStaged: xs row of token gx, shifted so row[4 step] is k = 32 step + 8 c
  int c;
  int gx;
  float inv;
  __device__ __forceinline__ uint4 AtStep(int32_t step) const {
    if constexpr (kStaged) {
      return row[step * (kGemvStepK / 8)];
    } else {
      return LoadX<T, kIn>(a, gx, step * kGemvStepK + 8 * c, inv);
    }
  }
};

}  // namespace pkv::gpu::gemv
