// The quantized-weight GEMM of qgemm.h, included only by the per-(dtype, weight format)
// instantiation files (qgemm_int4_bf16.cu, ...). Tiling: qgemm_plan.h; the packed weights' load
// and expansion: gemv_weights.cuh (the GEMV's own policies, so both see the same weights).
//
// Shared memory, one ring slot per stage (QGemmStageBytes):
//   x  [64 tokens][16 chunks of 8 k] 16-byte chunks; chunk j of token t at t * 16 + (j ^ 4 (t & 1))
//      so the 8 lanes of an lds.128 phase (tokens 2i, 2i + 1 by chunks c .. c + 3) hit 8 distinct
//      bank groups.
//   w  [256 rows][kWVecs] 16-byte vectors, the packed row's bytes of the stage in order (lane c of
//      unit u at u * 4 + c, as the GEMV loads them); fp8 rows (128 bytes) xor the vector index
//      with 4 (row & 1) for the same reason, 4-bit rows (64 bytes) need no swizzle.
//   s  [256] 4-bit scale words of the stage's group.
// Per stage a warp loads, per unit, one vector of each of its 4 rows per lane, expands each
// 32-k step into the A fragments of both 16-row halves once, and runs them against every token
// group that holds a live token (the test is warp-uniform), so a 16-token step does 1 / 4 of a
// 64-token step's MMAs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/decode/device_util.cuh"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/gemv_weights.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/pdl.cuh"
#include "kernels/model/qgemm.h"

namespace pkv::gpu::qgemm {

namespace dv = decode::dev;

template <typename W>
struct Layout {
  static constexpr int kUnitsPerStage = kQGemmStageK / (kGemvStepK * W::kSteps);  // 1 / 2
  static constexpr int kWVecs = 4 * kUnitsPerStage;  // 16-byte vectors per row and stage
  static constexpr int kXChunks = kQGemmStageK / 8;  // 16
  static constexpr int kXBytes = kQGemmTileTokens * kXChunks * 16;
  static constexpr int kWBytes = kQGemmTileRows * kWVecs * 16;
  static constexpr int kStageBytes = QGemmStageBytes(W::kFormat);
  static_assert(kXBytes + kWBytes + (W::kScaleWords ? kQGemmTileRows * 4 : 0) == kStageBytes);
  static __device__ __forceinline__ int WVec(int row, int v) {
    return row * kWVecs + (kWVecs == 8 ? v ^ ((row & 1) << 2) : v);
  }
  static __device__ __forceinline__ int XChunk(int tok, int j) {
    return tok * kXChunks + (j ^ ((tok & 1) << 2));
  }
};

// One CTA's work item (qgemm_plan.h: token tile fastest).
struct Item {
  int32_t tile = 0;  // row_tile * token_tiles + token_tile
  int32_t part = 0;
  int32_t row0 = 0, tok0 = 0;
  int32_t live = 0;  // tokens of the tile < m
  int32_t s_begin = 0, s_end = 0;
  int32_t rot = 0;  // the part's stages run from s_begin + rot, wrapping (QGemmArgs::stagger)
  // Iteration i's absolute stage.
  __device__ __forceinline__ int32_t Stage(int32_t i) const {
    const int32_t len = s_end - s_begin;
    const int32_t j = i + rot;
    return s_begin + (j < len ? j : j - len);
  }
};

__device__ __forceinline__ Item MakeItem(const QGemmPlan& p, bool stagger) {
  Item it;
  const int32_t b = blockIdx.x;
  const int32_t tt = b % p.token_tiles, rest = b / p.token_tiles;
  it.part = rest % p.parts;
  const int32_t rt = rest / p.parts;
  it.tile = rt * p.token_tiles + tt;
  it.row0 = rt * kQGemmTileRows;
  it.tok0 = tt * kQGemmTileTokens;
  it.live = min(kQGemmTileTokens, p.m - it.tok0);
  it.s_begin = static_cast<int32_t>(int64_t{it.part} * p.k_stages / p.parts);
  it.s_end = static_cast<int32_t>(int64_t{it.part + 1} * p.k_stages / p.parts);
  it.rot = stagger && it.s_end > it.s_begin ? (rt * 5) % (it.s_end - it.s_begin) : 0;
  return it;
}

// cp.async of stage s's packed weights (and scale words) of the tile's rows into `slot`. Rows
// past n load row n - 1 (never stored).
template <typename W>
__device__ __forceinline__ void LoadWeights(const QGemmArgs& a, const Item& it, int32_t s,
                                            uint8_t* slot) {
  using L = Layout<W>;
  const QGemmPlan& p = a.plan;
  const int64_t row_vecs = int64_t{p.k_stages} * L::kWVecs;
  uint4* ws = reinterpret_cast<uint4*>(slot + L::kXBytes);
#pragma unroll
  for (int i = 0; i < L::kWVecs * kQGemmTileRows / kQGemmThreads; ++i) {
    const int id = threadIdx.x + i * kQGemmThreads;
    const int r = id / L::kWVecs, v = id % L::kWVecs;
    const int64_t row = min(it.row0 + r, p.n - 1);
    const uint4* src = static_cast<const uint4*>(a.w) + row * row_vecs + int64_t{s} * L::kWVecs + v;
    if (a.l2_256b) {
      dv::CpAsync16Prefetch<256>(dv::SmemAddr(ws + L::WVec(r, v)), src, true);
    } else {
      dv::CpAsync16(dv::SmemAddr(ws + L::WVec(r, v)), src, true);
    }
  }
  if constexpr (W::kScaleWords) {
    uint32_t* ss = reinterpret_cast<uint32_t*>(slot + L::kXBytes + L::kWBytes);
    const int r = threadIdx.x;  // kQGemmThreads == kQGemmTileRows
    const int64_t row = min(it.row0 + r, p.n - 1);
    dv::CpAsync4(dv::SmemAddr(ss + r),
                 static_cast<const uint32_t*>(a.w_scales) + row * p.k_stages + s);
  }
}

// L2 prefetch of the first byte of each of the tile's rows in stage s (one row per thread).
template <typename W>
__device__ __forceinline__ void PrefetchWeights(const QGemmArgs& a, const Item& it, int32_t s) {
  using L = Layout<W>;
  const QGemmPlan& p = a.plan;
  const int64_t row = min(it.row0 + static_cast<int32_t>(threadIdx.x), p.n - 1);
  const uint4* src = static_cast<const uint4*>(a.w) + row * int64_t{p.k_stages} * L::kWVecs +
                     int64_t{s} * L::kWVecs;
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(src));
}

// cp.async of stage s's x chunks of the tile's tokens into `slot`; tokens >= m are zero-filled.
template <typename T, typename W>
__device__ __forceinline__ void LoadX(const QGemmArgs& a, const Item& it, int32_t s,
                                      uint8_t* slot) {
  using L = Layout<W>;
  uint4* xs = reinterpret_cast<uint4*>(slot);
#pragma unroll
  for (int i = 0; i < kQGemmTileTokens * L::kXChunks / kQGemmThreads; ++i) {
    const int id = threadIdx.x + i * kQGemmThreads;
    const int t = id / L::kXChunks, j = id % L::kXChunks;
    const bool valid = t < it.live;
    const T* src =
        static_cast<const T*>(a.x) +
        (valid ? int64_t{it.tok0 + t} * a.plan.k + int64_t{s} * kQGemmStageK + 8 * j : 0);
    dv::CpAsync16(dv::SmemAddr(xs + L::XChunk(t, j)), src, valid);
  }
}

// The MMAs of one ring slot: rows 32 warp .. + 31 against the live token groups.
template <typename T, typename W>
__device__ __forceinline__ void ComputeStage(const uint8_t* slot, int live, float (&acc)[2][8][4]) {
  using L = Layout<W>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const uint4* xs = reinterpret_cast<const uint4*>(slot);
  const uint4* ws = reinterpret_cast<const uint4*>(slot + L::kXBytes);
  const uint32_t* ss = reinterpret_cast<const uint32_t*>(slot + L::kXBytes + L::kWBytes);
#pragma unroll
  for (int u = 0; u < L::kUnitsPerStage; ++u) {
    uint4 v[2][2];
    uint32_t sw[2][2] = {{0u, 0u}, {0u, 0u}};
#pragma unroll
    for (int f = 0; f < 2; ++f) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp * 32 + f * 16 + hh * 8 + g;
        v[f][hh] = ws[L::WVec(row, u * 4 + c)];
        if constexpr (W::kScaleWords) sw[f][hh] = ss[row];
      }
    }
#pragma unroll
    for (int q = 0; q < W::kSteps; ++q) {
      uint32_t wa[2][4], wb[2][4];
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        const uint4 ea = W::template Expand<T>(v[f][0], sw[f][0], q);
        const uint4 eb = W::template Expand<T>(v[f][1], sw[f][1], q);
        wa[f][0] = ea.x, wa[f][1] = ea.y, wa[f][2] = ea.z, wa[f][3] = ea.w;
        wb[f][0] = eb.x, wb[f][1] = eb.y, wb[f][2] = eb.z, wb[f][3] = eb.w;
      }
      const int chunk = (u * W::kSteps + q) * 4 + c;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (8 * j < live) {  // warp-uniform
          const uint4 xv = xs[L::XChunk(8 * j + g, chunk)];
          const uint32_t x4[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            uint32_t fb[2];
            GemvFragB(x4, h, fb);
#pragma unroll
            for (int f = 0; f < 2; ++f) {
              uint32_t fa[4];
              GemvFragA(wa[f], wb[f], h, fa);
              dv::Mma16816<T>(acc[f][j], fa, fb[0], fb[1]);
            }
          }
        }
      }
    }
  }
}

// Split tiles: leaves this CTA's sums in its slot; the CTA that arrives last gets the sum over
// all parts in part order (true) and resets the ticket. Uniform over the CTA.
__device__ __forceinline__ bool CombineParts(const QGemmArgs& a, const Item& it, int live,
                                             float (&acc)[2][8][4], int* last) {
  const int tid = threadIdx.x;
  float4* slots =
      reinterpret_cast<float4*>(a.partials) + int64_t{it.tile} * a.plan.parts * 16 * kQGemmThreads;
  float4* mine = slots + int64_t{it.part} * 16 * kQGemmThreads;
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (8 * j < live) {
        __stcg(mine + (f * 8 + j) * kQGemmThreads + tid,
               make_float4(acc[f][j][0], acc[f][j][1], acc[f][j][2], acc[f][j][3]));
      }
    }
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const int prev = atomicAdd(a.tickets + it.tile, 1);
    *last = prev == a.plan.parts - 1;
    if (*last) a.tickets[it.tile] = 0;  // every part has arrived: ready for the next launch
  }
  __syncthreads();
  if (!*last) return false;
  __threadfence();
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (8 * j < live) {
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int32_t q = 0; q < a.plan.parts; ++q) {
          const float4 v = __ldcg(slots + (int64_t{q} * 16 + f * 8 + j) * kQGemmThreads + tid);
          s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        acc[f][j][0] = s.x, acc[f][j][1] = s.y, acc[f][j][2] = s.z, acc[f][j][3] = s.w;
      }
    }
  }
  return true;
}

// y[t][row] for the lane's accumulators (C fragment: c0 (row g, token 2c), c1 (g, 2c + 1),
// c2 (g + 8, 2c), c3 (g + 8, 2c + 1)), times the fp8 row scale.
template <typename T, typename W>
__device__ __forceinline__ void Store(const QGemmArgs& a, const Item& it,
                                      const float (&acc)[2][8][4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const QGemmPlan& p = a.plan;
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int32_t row = it.row0 + warp * 32 + f * 16 + hh * 8 + g;
      if (row >= p.n) continue;
      float scale = 1.f;
      if constexpr (W::kRowScale) {
        scale = __ldg(static_cast<const float*>(a.w_scales) + (a.w_scale_count == 1 ? 0 : row));
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int t = 8 * j + 2 * c + e;
          if (t >= it.live) continue;
          const float v = acc[f][j][hh * 2 + e] * scale;
          const int64_t idx = int64_t{it.tok0 + t} * p.n + row;
          if (a.y_f32) {
            static_cast<float*>(a.y)[idx] = v;
          } else {
            static_cast<T*>(a.y)[idx] = dev::FromF<T>(v);
          }
        }
      }
    }
  }
}

template <typename T, typename W>
__global__ void __launch_bounds__(kQGemmThreads, QGemmCtasPerSm(W::kFormat))
    QGemmKernel(const QGemmArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int last;
  using L = Layout<W>;
  const QGemmPlan& p = a.plan;
  const Item it = MakeItem(p, a.stagger);
  const int stages = p.stages;
  const int32_t len = it.s_end - it.s_begin;
  auto slot = [&](int32_t i) { return smem + (i % stages) * L::kStageBytes; };
  // Weights never depend on earlier kernels: the first stages' are in flight before the wait.
  for (int i = 0; i < stages - 1; ++i) {
    if (i < len) LoadWeights<W>(a, it, it.Stage(i), slot(i));
  }
  for (int i = stages - 1; i < stages - 1 + a.prefetch_stages; ++i) {
    if (i < len) PrefetchWeights<W>(a, it, it.Stage(i));
  }
  PdlWait();
  PdlTrigger();
  for (int i = 0; i < stages - 1; ++i) {
    if (i < len) LoadX<T, W>(a, it, it.Stage(i), slot(i));
    dv::CpAsyncCommit();
  }
  float acc[2][8][4];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[f][j][0] = acc[f][j][1] = acc[f][j][2] = acc[f][j][3] = 0.f;
  }
  for (int32_t i = 0; i < len; ++i) {
    dv::CpAsyncWaitDynamic(stages -
                           2);  // iteration i's stage has landed (groups complete in order)
    __syncthreads();            // ... for every thread; the slot refilled below is free
    const int32_t next = i + stages - 1;
    if (next < len) {
      LoadWeights<W>(a, it, it.Stage(next), slot(next));
      LoadX<T, W>(a, it, it.Stage(next), slot(next));
      if (next + a.prefetch_stages < len)
        PrefetchWeights<W>(a, it, it.Stage(next + a.prefetch_stages));
    }
    dv::CpAsyncCommit();
    ComputeStage<T, W>(slot(i), it.live, acc);
  }
  if (p.parts > 1 && !CombineParts(a, it, it.live, acc, &last)) return;
  Store<T, W>(a, it, acc);
}

template <typename T, typename W>
absl::Status LaunchQGemmTyped(const QGemmArgs& a, cudaStream_t stream) {
  auto kernel = QGemmKernel<T, W>;
  // Above the default 48 KB the kernel must opt in (per device, so every launch asks; a host-side
  // attribute, allowed during stream capture).
  if (a.plan.smem_bytes > (48 << 10)) {
    PKV_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, a.plan.smem_bytes));
  }
  return CudaStatus(LaunchMaybePdl(kernel, dim3(a.plan.items), dim3(kQGemmThreads),
                                   a.plan.smem_bytes, stream, a.pdl, a),
                    "QGemmKernel");
}

}  // namespace pkv::gpu::qgemm
