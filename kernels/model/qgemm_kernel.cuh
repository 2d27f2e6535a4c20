// The quantized-weight GEMM of qgemm.h, included only by the per-(dtype, weight format)
// instantiation files (qgemm_int4_bf16.cu, ...). Tiling: qgemm_plan.h; the packed weights' load
// and expansion: gemv_weights.cuh (the GEMV's own policies, so both see the same weights).
//
// Shared memory: `stages` ring slots (QGemmStageBytes), then the 4-bit scale table.
//   x  [tile tokens][stage k / 8] 16-byte chunks; chunk j of token t at t * chunks + (j ^ 4 (t &
//      1)) so the 8 lanes of an lds.128 phase (tokens 2i, 2i + 1 by chunks c .. c + 3) hit 8
//      distinct bank groups.
//   w  [256 rows][8] 16-byte vectors: the row's 128 packed bytes of the stage in order (lane c of
//      unit u at u * 4 + c, as the GEMV loads them), the vector index xor 4 (row & 1) for the
//      same reason.
//   s  (4-bit) [256 rows][scale_stride] the scale words of the CTA's part, group by group.
// Per unit a warp loads one vector of each of its 4 rows per lane, expands each 32-k step into
// the A fragments of both 16-row halves once, and runs them against the tile's token groups that
// hold a live token (the test is warp-uniform; a tile has 2, 4 or 8 groups, compile time).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/decode/device_util.cuh"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/gemv_weights.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/qgemm.h"

namespace pkv::gpu::qgemm {

namespace dv = decode::dev;

template <typename W, int kGroups>
struct Layout {
  static constexpr int kTokens = 8 * kGroups;
  static constexpr int kUnits = 2;  // the GEMV's 64-byte units per row and stage
  static constexpr int kStageK = QGemmStageK(W::kFormat);
  static constexpr int kWVecs = kQGemmRowStageBytes / 16;  // 8 per row and stage
  static constexpr int kXChunks = kStageK / 8;             // 32 / 16
  static constexpr int kXBytes = kTokens * kXChunks * 16;
  static constexpr int kWBytes = kQGemmTileRows * kWVecs * 16;
  static constexpr int kStageBytes = QGemmStageBytes(W::kFormat, kTokens);
  static_assert(kXBytes + kWBytes == kStageBytes && kWVecs == 4 * kUnits &&
                kStageK == kUnits * kGemvStepK * W::kSteps);
  static __device__ __forceinline__ int WVec(int row, int v) {
    return row * kWVecs + (v ^ ((row & 1) << 2));
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
  it.tok0 = tt * p.tile_tokens;
  it.live = min(p.tile_tokens, p.m - it.tok0);
  it.s_begin = QGemmPartBegin(p.k_stages, p.parts, it.part);
  it.s_end = QGemmPartBegin(p.k_stages, p.parts, it.part + 1);
  it.rot = stagger && it.s_end > it.s_begin ? (rt * 5) % (it.s_end - it.s_begin) : 0;
  return it;
}

// cp.async of stage s's packed weights of the tile's rows into `slot`: 8 threads copy a row's
// 128-byte line. Rows past n load row n - 1 (never stored); the second unit of a 4-bit stage past
// k is zero-filled.
template <typename W, int kGroups>
__device__ __forceinline__ void LoadWeights(const QGemmArgs& a, const Item& it, int32_t s,
                                            uint8_t* slot) {
  using L = Layout<W, kGroups>;
  const QGemmPlan& p = a.plan;
  // 16-byte vectors per packed row: 4-bit 4 per 128 k, fp8 8.
  const int64_t row_vecs = int64_t{p.k_groups} * (W::kFormat == GemvWeightFormat::kInt4 ? 4 : 8);
  uint4* ws = reinterpret_cast<uint4*>(slot + L::kXBytes);
#pragma unroll
  for (int i = 0; i < L::kWVecs * kQGemmTileRows / kQGemmThreads; ++i) {
    const int id = threadIdx.x + i * kQGemmThreads;
    const int r = id / L::kWVecs, v = id % L::kWVecs;
    const int64_t row = min(it.row0 + r, p.n - 1);
    const int32_t vec = s * L::kWVecs + v;
    const bool valid = vec < row_vecs;
    const uint4* src = static_cast<const uint4*>(a.w) + row * row_vecs + (valid ? vec : 0);
    if (a.l2_256b) {
      dv::CpAsync16Prefetch<256>(dv::SmemAddr(ws + L::WVec(r, v)), src, valid);
    } else {
      dv::CpAsync16(dv::SmemAddr(ws + L::WVec(r, v)), src, valid);
    }
  }
}

// cp.async of the 4-bit scale words of the item's part (groups g_begin .. g_end) into the table:
// warp w copies rows w, w + 8, ...; a row's words are one contiguous run.
__device__ __forceinline__ void LoadScaleTable(const QGemmArgs& a, const Item& it,
                                               uint32_t* table) {
  const QGemmPlan& p = a.plan;
  const int32_t g_begin = it.s_begin * 2, g_end = min(it.s_end * 2, p.k_groups);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r = warp; r < kQGemmTileRows; r += kQGemmWarps) {
    const int64_t row = min(it.row0 + r, p.n - 1);
    const uint32_t* src = static_cast<const uint32_t*>(a.w_scales) + row * p.k_groups;
    for (int32_t g = g_begin + lane; g < g_end; g += 32) {
      dv::CpAsync4(dv::SmemAddr(table + r * p.scale_stride + (g - g_begin)), src + g);
    }
  }
}

// L2 prefetch of the first byte of each of the tile's rows in stage s (one row per thread).
template <typename W, int kGroups>
__device__ __forceinline__ void PrefetchWeights(const QGemmArgs& a, const Item& it, int32_t s) {
  using L = Layout<W, kGroups>;
  const QGemmPlan& p = a.plan;
  const int64_t row = min(it.row0 + static_cast<int32_t>(threadIdx.x), p.n - 1);
  const int64_t row_vecs = int64_t{p.k_groups} * (W::kFormat == GemvWeightFormat::kInt4 ? 4 : 8);
  const uint4* src =
      static_cast<const uint4*>(a.w) + row * row_vecs + min(int64_t{s} * L::kWVecs, row_vecs - 1);
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(src));
}

// cp.async of stage s's x chunks of the tile's tokens into `slot`; tokens >= m and k past the end
// (the last 4-bit stage of an odd group count) are zero-filled.
template <typename T, typename W, int kGroups>
__device__ __forceinline__ void LoadX(const QGemmArgs& a, const Item& it, int32_t s,
                                      uint8_t* slot) {
  using L = Layout<W, kGroups>;
  uint4* xs = reinterpret_cast<uint4*>(slot);
  constexpr int kPerThread = (L::kTokens * L::kXChunks + kQGemmThreads - 1) / kQGemmThreads;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int id = threadIdx.x + i * kQGemmThreads;
    if (L::kTokens * L::kXChunks % kQGemmThreads != 0 && id >= L::kTokens * L::kXChunks) break;
    const int t = id / L::kXChunks, j = id % L::kXChunks;
    const int32_t kk = s * L::kStageK + 8 * j;
    const bool valid = t < it.live && kk < a.plan.k;
    const T* src = static_cast<const T*>(a.x) + (valid ? int64_t{it.tok0 + t} * a.plan.k + kk : 0);
    dv::CpAsync16(dv::SmemAddr(xs + L::XChunk(t, j)), src, valid);
  }
}

// The MMAs of one ring slot: rows 32 warp .. + 31 against the live token groups (kFull: all of
// the tile's, no test). `sc`: the scale table at the stage's first group (4-bit), `units`: the
// stage's units (a 4-bit stage past the last group has one).
template <typename T, typename W, int kGroups, bool kFull>
__device__ __forceinline__ void ComputeStage(const uint8_t* slot, const uint32_t* sc,
                                             int32_t scale_stride, int units, int live,
                                             float (&acc)[2][kGroups][4]) {
  using L = Layout<W, kGroups>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const uint4* xs = reinterpret_cast<const uint4*>(slot);
  const uint4* ws = reinterpret_cast<const uint4*>(slot + L::kXBytes);
  // One unit at a time (not unrolled): the second unit's loads and expansions would not fit the
  // 128 registers of a 2-CTA tile beside the first's.
#pragma unroll 1
  for (int u = 0; u < units; ++u) {
    uint4 v[2][2];
    uint32_t sw[2][2] = {{0u, 0u}, {0u, 0u}};
#pragma unroll
    for (int f = 0; f < 2; ++f) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int row = warp * 32 + f * 16 + hh * 8 + g;
        v[f][hh] = ws[L::WVec(row, u * 4 + c)];
        if constexpr (W::kScaleWords) sw[f][hh] = sc[row * scale_stride + u];
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
      for (int j = 0; j < kGroups; ++j) {
        if (kFull || 8 * j < live) {  // warp-uniform
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
template <int kGroups>
__device__ __forceinline__ bool CombineParts(const QGemmArgs& a, const Item& it, int live,
                                             float (&acc)[2][kGroups][4], int* last) {
  constexpr int kSlot = 2 * kGroups * kQGemmThreads;  // float4s per part
  const int tid = threadIdx.x;
  float4* slots = reinterpret_cast<float4*>(a.partials) + int64_t{it.tile} * a.plan.parts * kSlot;
  float4* mine = slots + int64_t{it.part} * kSlot;
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      if (8 * j < live) {
        __stcg(mine + (f * kGroups + j) * kQGemmThreads + tid,
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
    for (int j = 0; j < kGroups; ++j) {
      if (8 * j < live) {
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int32_t q = 0; q < a.plan.parts; ++q) {
          const float4 v =
              __ldcg(slots + int64_t{q} * kSlot + (f * kGroups + j) * kQGemmThreads + tid);
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
template <typename T, typename W, int kGroups>
__device__ __forceinline__ void Store(const QGemmArgs& a, const Item& it,
                                      const float (&acc)[2][kGroups][4]) {
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
      for (int j = 0; j < kGroups; ++j) {
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

template <typename T, typename W, int kGroups>
__global__ void __launch_bounds__(kQGemmThreads, QGemmCtasPerSm(W::kFormat, 8 * kGroups))
    QGemmKernel(const QGemmArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int last;
  using L = Layout<W, kGroups>;
  const QGemmPlan& p = a.plan;
  const Item it = MakeItem(p, a.stagger);
  const int stages = p.stages;
  const int32_t len = it.s_end - it.s_begin;
  auto slot = [&](int32_t i) { return smem + (i % stages) * L::kStageBytes; };
  uint32_t* table = reinterpret_cast<uint32_t*>(smem + stages * L::kStageBytes);
  // Weights never depend on earlier kernels: the scales and the first stages' weights are in
  // flight before the wait (the table in the first commit group).
  if constexpr (W::kScaleWords) LoadScaleTable(a, it, table);
  for (int i = 0; i < stages - 1; ++i) {
    if (i < len) LoadWeights<W, kGroups>(a, it, it.Stage(i), slot(i));
  }
  for (int i = stages - 1; i < stages - 1 + a.prefetch_stages; ++i) {
    if (i < len) PrefetchWeights<W, kGroups>(a, it, it.Stage(i));
  }
  PdlWait();
  PdlTrigger();
  for (int i = 0; i < stages - 1; ++i) {
    if (i < len) LoadX<T, W, kGroups>(a, it, it.Stage(i), slot(i));
    dv::CpAsyncCommit();
  }
  float acc[2][kGroups][4];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      acc[f][j][0] = acc[f][j][1] = acc[f][j][2] = acc[f][j][3] = 0.f;
    }
  }
  const int32_t full_stages = p.k_groups / 2;  // 4-bit stages with both groups
  for (int32_t i = 0; i < len; ++i) {
    // Iteration i's stage has landed (groups complete in order) ...
    dv::CpAsyncWaitDynamic(stages - 2);
    __syncthreads();  // ... for every thread; the slot refilled below is free
    const int32_t next = i + stages - 1;
    if (next < len) {
      LoadWeights<W, kGroups>(a, it, it.Stage(next), slot(next));
      LoadX<T, W, kGroups>(a, it, it.Stage(next), slot(next));
      if (next + a.prefetch_stages < len)
        PrefetchWeights<W, kGroups>(a, it, it.Stage(next + a.prefetch_stages));
    }
    dv::CpAsyncCommit();
    const int32_t s = it.Stage(i);
    const int units = W::kScaleWords && s >= full_stages ? 1 : 2;
    const uint32_t* sc = table + (s - it.s_begin) * 2;
    if (it.live == L::kTokens) {
      ComputeStage<T, W, kGroups, true>(slot(i), sc, p.scale_stride, units, it.live, acc);
    } else {
      ComputeStage<T, W, kGroups, false>(slot(i), sc, p.scale_stride, units, it.live, acc);
    }
  }
  if (p.parts > 1 && !CombineParts<kGroups>(a, it, it.live, acc, &last)) return;
  Store<T, W, kGroups>(a, it, acc);
}

template <typename T, typename W, int kGroups>
absl::Status LaunchQGemmTile(const QGemmArgs& a, cudaStream_t stream) {
  auto kernel = QGemmKernel<T, W, kGroups>;
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

// The tile_tokens dispatch (CheckPlan has rejected other values).
template <typename T, typename W>
absl::Status LaunchQGemmTyped(const QGemmArgs& a, cudaStream_t stream) {
  switch (a.plan.tile_tokens) {
    case 16:
      return LaunchQGemmTile<T, W, 2>(a, stream);
    case 32:
      return LaunchQGemmTile<T, W, 4>(a, stream);
    default:
      return LaunchQGemmTile<T, W, 8>(a, stream);
  }
}

}  // namespace pkv::gpu::qgemm
