// The epilogues of the fused GEMV (gemv.h: GemvEpilogue) on a tile's fp32 sums in shared
// memory; included by gemv_kernel.cuh and gemv_bulk.cuh only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/model/gemv.h"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/model_device.cuh"

namespace pkv::gpu::gemv {

struct Smem {
  float4 red[kGemvWarps][32];               // each warp's C fragments
  float y[kGemvTileRows][kGemvMaxTokens];   // the tile's sums (slot, token)
  float sq[kGemvTileRows][kGemvMaxTokens];  // kResidual: the new residual, squared
  float inv[kGemvMaxTokens];                // kRmsNorm: 1 / rms of each token
  int last;                                 // split tiles: this CTA finishes the tile
};

// kRmsNorm: 1 / rms of each token from the partial sums of squares, added in a fixed order.
__device__ __forceinline__ void ComputeInv(const GemvArgs& a, Smem& sm) {
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    for (int t = 0; t < a.tokens; ++t) {
      float s = 0.f;
      for (int32_t j = lane; j < a.num_sum_sq_parts; j += 32) {
        s += __ldcg(a.sum_sq_parts + int64_t{j} * kGemvMaxTokens + t);
      }
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) sm.inv[t] = rsqrtf(s / static_cast<float>(a.plan.k) + a.eps);
    }
  }
  __syncthreads();
}

template <typename T>
__device__ __forceinline__ void StoreEpilogue(const GemvArgs& a, const Smem& sm, int32_t tile) {
  const int tid = threadIdx.x, slot = tid >> 3, t = tid & 7;
  if (tid >= kGemvTileOutputs || t >= a.tokens) return;
  const int32_t row = GemvRow(a.plan.group_rows, tile, slot);
  if (row >= a.plan.n) return;
  const int64_t idx = int64_t{t} * a.plan.n + row;
  if (a.y_f32) {
    static_cast<float*>(a.y)[idx] = sm.y[slot][t];
  } else {
    static_cast<T*>(a.y)[idx] = dev::FromF<T>(sm.y[slot][t]);
  }
}

// REQUIRES: called by every thread (it synchronises).
template <typename T>
__device__ __forceinline__ void ResidualEpilogue(const GemvArgs& a, Smem& sm, int32_t tile) {
  const int tid = threadIdx.x, slot = tid >> 3, t = tid & 7;
  if (tid < kGemvTileOutputs) {
    float v = 0.f;
    if (t < a.tokens) {
      const int32_t row = tile * kGemvTileRows + slot;
      float* xp = a.residual + int64_t{t} * a.plan.n + row;
      v = *xp + dev::ToF(dev::FromF<T>(sm.y[slot][t]));
      if (a.bias != nullptr) v += a.bias[row];
      *xp = v;
    }
    sm.sq[slot][t] = v * v;
  }
  __syncthreads();
  if (tid < a.tokens) {
    float s = 0.f;
    for (int r = 0; r < kGemvTileRows; ++r) s += sm.sq[r][tid];
    a.sum_sq_out[int64_t{tile} * kGemvMaxTokens + tid] = s;
  }
}

template <typename T>
__device__ __forceinline__ void RopeKvEpilogue(const GemvArgs& a, const Smem& sm, int32_t tile) {
  const int tid = threadIdx.x, p = tid >> 3, t = tid & 7;
  if (tid >= kGemvTileOutputs / 2 || t >= a.tokens) return;
  const int d = a.head_dim, half = d / 2, tiles_per_head = d / kGemvTileRows;
  const int h = tile / tiles_per_head, i = (tile - h * tiles_per_head) * 8 + p;
  const int32_t row1 = h * d + i, row2 = row1 + half;  // GemvRow(d, tile, p), (.., p + 8)
  float y1 = sm.y[p][t], y2 = sm.y[p + 8][t];
  if (a.bias != nullptr) {
    y1 += a.bias[row1];
    y2 += a.bias[row2];
  }
  const int hq = a.num_q_heads, hkv = a.num_kv_heads;
  if (h < hq + hkv) {  // q and k heads rotate (rotate-half; the angle in double)
    double s, c;
    sincos(static_cast<double>(a.positions[t]) * a.inv_freq[i], &s, &c);
    const float cf = static_cast<float>(c), sf = static_cast<float>(s);
    const float r1 = y1 * cf - y2 * sf, r2 = y2 * cf + y1 * sf;
    y1 = r1;
    y2 = r2;
  }
  T* dst;
  if (h < hq) {
    dst = static_cast<T*>(a.q_out) + (int64_t{t} * hq + h) * d;
  } else {
    const int32_t slot = a.kv_slots[t];
    if (slot < 0) return;  // graph padding: no KV slot
    const bool is_k = h < hq + hkv;
    const int64_t kvh = is_k ? h - hq : h - hq - hkv;
    const int64_t page = slot / a.page_size, off = slot % a.page_size;
    T* cache = static_cast<T*>(is_k ? a.k_cache : a.v_cache);
    dst = cache + ((page * hkv + kvh) * a.page_size + off) * d;
  }
  dst[i] = dev::FromF<T>(y1);
  dst[i + half] = dev::FromF<T>(y2);
}

template <typename T>
__device__ __forceinline__ void SiluMulEpilogue(const GemvArgs& a, const Smem& sm, int32_t tile) {
  const int tid = threadIdx.x, p = tid >> 3, t = tid & 7;
  if (tid >= kGemvTileOutputs / 2 || t >= a.tokens) return;
  const int32_t inter = a.plan.n / 2, j = tile * 8 + p;  // gate row j, up row inter + j
  // The gate/up outputs rounded to T first, as the unfused path stores them.
  const float g = dev::ToF(dev::FromF<T>(sm.y[p][t]));
  const float u = dev::ToF(dev::FromF<T>(sm.y[p + 8][t]));
  static_cast<T*>(a.act)[int64_t{t} * inter + j] = dev::FromF<T>(g / (1.f + expf(-g)) * u);
}

}  // namespace pkv::gpu::gemv
