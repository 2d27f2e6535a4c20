// The fused few-token projection kernel of gemv.h, included only by the per-(dtype, weight
// format) instantiation files (gemv_bf16.cu, gemv_int4_fp16.cu, ...). Decomposition and operand
// layout: gemv_plan.h; the weight formats' load stage: gemv_weights.cuh.
//
// Per item a warp streams its run of K units kB units at a time (kBatch = 4; deep plans 8,
// gemv_plan.h): the 2 * kB 16-byte weight loads of a batch (and, for 4-bit weights, their scale
// words) are issued before the first MMA that needs them, so each lane keeps 128 bytes (a warp
// 4 KB, a CTA 32 KB) of packed weights in flight in every format (deep: twice that); with 3 CTAs
// per SM (2 for 4-bit and deep: kGemvMinCtas) that is 96 KB (64, 128) per SM. The H200's ~4.6
// TB/s over 132 SMs needs 35 KB per SM per us of load latency, and loaded latency is well above
// 1 us: 2-CTA launches of 4-unit batches streamed at 2.8-3.6 TB/s (ncu, final9).
// Weights are read with the streaming hint (evict first). Activations (kStage, when they fit:
// gemv_plan.h, GemvStageSpan) are copied once per CTA into shared memory after the dependency
// wait, so each step's x operand is a shared-memory read; without staging each step reads its
// x words through L1, and a CTA's first item misses it at every step, an L2 round trip the
// in-order warp waits for at the MMA (bench/NOTES.md, "x staging"). A CTA's next item's first batch
// is issued before the current item's reduction barrier, and the first item's before the PDL
// wait, so loads never drain at an item boundary.
// Measured slower on the H200, so not how this kernel loads (bench/NOTES.md, "w4speed" and
// "Thirteenth session"): weights through per-warp cp.async rings in shared memory (per-lane,
// chunked and memory-shaped copies: the MIO queue, not memory, becomes the limit), per-unit
// register refills for dense weights, 2 or 4 CTAs an SM for dense and fp8 (fewer bytes in
// flight; spills), W8A8 e4m3 MMAs for FP8 weights (the K loop is not instruction-bound), and
// items finished without a CTA barrier by the last warp to arrive (one warp's serial epilogue).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/common/pdl.cuh"
#include "kernels/decode/device_util.cuh"
#include "kernels/model/gemv.h"
#include "kernels/model/gemv_bulk.cuh"
#include "kernels/model/gemv_epilogue.cuh"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/gemv_weights.cuh"
#include "kernels/model/gemv_x.cuh"
#include "kernels/model/model_device.cuh"

namespace pkv::gpu::gemv {

constexpr int kThreads = kGemvWarps * 32;
constexpr int kBatch = kGemvBatchUnits;  // K units whose weight loads a warp keeps in flight
constexpr int kMinCtasPerSm = 3;
// Resident CTAs per SM the kernels of format W are compiled for (__launch_bounds__; the planner
// reads the resulting occupancy through QueryGemvDevice). Dense and fp8: 3 (80 registers; 96 KB
// of weight loads in flight per SM). 4-bit: 2 (128 registers): a 4-bit unit is 4 steps of
// dequantize-and-MMA per 16-byte load, so the kernel is bound by each warp's instruction chain,
// not by bytes in flight, and at 80 registers it spilled. Measured on the H200 (chain timing, T=1,
// bench/NOTES.md "w4reg"): 8B down 19.1 -> 14.5 us, o 7.7 -> 6.6 (256 items: about 2 CTAs an SM
// either way), gate/up 23.9 -> 23.7 (T=8: 31.6 -> 27.2), qkv 8.5 -> 9.1 (384 items on 264 CTAs);
// e2e AWQ B=1 2.74 -> 2.63 ms, B=8 8.75 -> 7.54 ms.
// Deep-batch kernels (kB = kGemvDeepBatchUnits, gemv_plan.h): 2, the 16 loads' 64 registers.
template <typename W, int kB>
inline constexpr int kGemvMinCtas =
    W::kFormat == GemvWeightFormat::kInt4 || kB > kBatch ? 2 : kMinCtasPerSm;

// One item as a lane sees it.
struct Item {
  int32_t tile = 0;
  int32_t part = 0;
  GemvStepRange steps;           // this warp's K units
  const uint4* wa = nullptr;     // packed weight row of slot g (clamped into [0, n): masked rows
  const uint4* wb = nullptr;     // load row n - 1 and are never stored); slot g + 8
  const uint32_t* sa = nullptr;  // W::kScaleWords: the rows' scale words, one per unit
  const uint32_t* sb = nullptr;
};

// A batch of loads in flight: units [s, s + kB) of rows g and g + 8.
template <int kB>
struct Batch {
  uint4 va[kB], vb[kB];
  uint32_t sa[kB], sb[kB];  // W::kScaleWords only
};

template <typename W>
__device__ __forceinline__ Item MakeItem(const GemvArgs& a, int32_t item, int warp, int g) {
  const GemvPlan& p = a.plan;
  Item it;
  // Without split-K (every 8B shape) an item is its tile and the warp's run needs no divide; the
  // row map divides by the plan's multiply-shift divisor (integer divides cost ~20 instructions,
  // paid twice per item: this item's and the next one's preload).
  if (p.parts == 1) {
    it.tile = item;
    it.part = 0;
    it.steps = {warp * p.units / kGemvWarps, (warp + 1) * p.units / kGemvWarps};
  } else {
    it.tile = item / p.parts;
    it.part = item - it.tile * p.parts;
    it.steps = GemvWarpSteps(p.units, p.parts, it.part, warp);
  }
  const int64_t row_vecs = int64_t{p.units} * 4;  // a unit is 16 bytes for each of 4 lanes
  const int64_t ra = min(GemvPlanRow(p, it.tile, g), p.n - 1);
  const int64_t rb = min(GemvPlanRow(p, it.tile, g + 8), p.n - 1);
  it.wa = static_cast<const uint4*>(a.w) + ra * row_vecs;
  it.wb = static_cast<const uint4*>(a.w) + rb * row_vecs;
  if constexpr (W::kScaleWords) {
    it.sa = static_cast<const uint32_t*>(a.w_scales) + ra * p.units;
    it.sb = static_cast<const uint32_t*>(a.w_scales) + rb * p.units;
  }
  return it;
}

// Weight loads of units s + [u0, u1) ∩ the warp's run into slots [u0, u1): lane c reads 16 bytes
// of each unit.
template <typename W, int kB>
__device__ __forceinline__ void LoadUnits(const Item& it, int32_t s, int u0, int u1, int c,
                                          Batch<kB>& b) {
#pragma unroll
  for (int u = u0; u < u1; ++u) {
    if (s + u < it.steps.end) {
      b.va[u] = __ldcs(it.wa + int64_t{s + u} * 4 + c);
      b.vb[u] = __ldcs(it.wb + int64_t{s + u} * 4 + c);
      if constexpr (W::kScaleWords) {  // the 4 lanes of a row read one word: one transaction
        b.sa[u] = __ldcs(it.sa + s + u);
        b.sb[u] = __ldcs(it.sb + s + u);
      }
    }
  }
}
template <typename W, int kB>
__device__ __forceinline__ void LoadBatch(const Item& it, int32_t s, int c, Batch<kB>& b) {
  LoadUnits<W>(it, s, 0, kB, c, b);
}

// 4-bit and fp8 weights refill a batch by halves (the K loop): a 4-bit unit is 4 steps of
// compute per 16-byte load and an fp8 unit 2, so an item of several batches (8B down: 14 4-bit
// units a warp) otherwise waits a full load latency per batch with nothing in flight. Dense keeps
// whole-batch loads (per-unit refills lost 0.81 -> 0.51 of stream on dense, bench/NOTES.md
// "w4speed"). fp8 by halves: 8B FP8 B=1 e2e -1.0% (3.05 -> 3.02 ms, three samples; NOTES
// "Twelfth session").
template <typename W>
inline constexpr bool kRefillHalves = W::kFormat != GemvWeightFormat::kDense;

__device__ __forceinline__ void PrefetchL2(const Item& it, int32_t from, int32_t count, int c) {
  const int32_t to = min(it.steps.end, from + count);
  for (int32_t s = from; s < to; ++s) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(it.wa + int64_t{s} * 4 + c));
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(it.wb + int64_t{s} * 4 + c));
  }
}

// The two MMAs of one step (gemv_plan.h: GemvFragA / GemvFragB).
template <typename T>
__device__ __forceinline__ void MmaStep(float (&acc)[4], const uint4& wa, const uint4& wb,
                                        const uint4& xv) {
  const uint32_t a4[4] = {wa.x, wa.y, wa.z, wa.w};
  const uint32_t b4[4] = {wb.x, wb.y, wb.z, wb.w};
  const uint32_t x4[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint32_t fa[4], fb[2];
    GemvFragA(a4, b4, h, fa);
    GemvFragB(x4, h, fb);
    decode::dev::Mma16816<T>(acc, fa, fb[0], fb[1]);
  }
}

// The MMA operand type for weights W under activations T. FP8 weights of a bf16 model run fp16
// MMAs: an e4m3 pair becomes fp16 in one cvt.rn.f16x2.e4m3x2 (E4m3Pair<__half>) where bf16 takes
// five instructions (E4m3Pair<__nv_bfloat16>), and the step's x words are converted instead
// (XAs: 8 values a step against 16 weights). The products are the same: every e4m3 value and
// every bf16 value inside fp16's range is exact in fp16, and fp16 and bf16 products are exact in
// the fp32 accumulators. Outside the range a bf16 x above 65504 in magnitude becomes inf. Staged
// x is converted once per CTA (StageX); x read from global memory is converted at each step.
#ifndef PKV_GEMV_FP8_HALF_MMA
#define PKV_GEMV_FP8_HALF_MMA 1
#endif
template <typename T, typename W>
using GemvMmaT = std::conditional_t<PKV_GEMV_FP8_HALF_MMA && W::kFormat == GemvWeightFormat::kFp8 &&
                                        std::is_same_v<T, __nv_bfloat16>,
                                    __half, T>;

// The kSteps steps of unit `unit` into acc. W::kUnitScale: the unit's MMAs sum into their own
// accumulators, which one fp32 multiply-add per output scales into acc (C fragment: c0, c1 are
// row g, c2, c3 row g + 8, so sa scales the first two and sb the last two).
template <typename T, typename W, typename X>
__device__ __forceinline__ void ComputeUnit(const X& x, int32_t unit, const uint4& va,
                                            const uint4& vb, uint32_t sa, uint32_t sb,
                                            float (&acc)[4]) {
  if constexpr (W::kUnitScale) {
    float ua[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int q = 0; q < W::kSteps; ++q) {
      const int32_t step = unit * W::kSteps + q;
      static_assert(std::is_same_v<typename X::Word, T>);
      MmaStep<T>(ua, W::template Operand<T>(va, sa, q), W::template Operand<T>(vb, sb, q),
                 x.AtStep(step));
    }
    const float fa = W::template UnitScale<T>(sa), fb = W::template UnitScale<T>(sb);
    acc[0] = fmaf(fa, ua[0], acc[0]);
    acc[1] = fmaf(fa, ua[1], acc[1]);
    acc[2] = fmaf(fb, ua[2], acc[2]);
    acc[3] = fmaf(fb, ua[3], acc[3]);
  } else {
    using M = GemvMmaT<T, W>;
#pragma unroll
    for (int q = 0; q < W::kSteps; ++q) {
      const int32_t step = unit * W::kSteps + q;
      MmaStep<M>(acc, W::template Operand<M>(va, sa, q), W::template Operand<M>(vb, sb, q),
                 XAs<typename X::Word, M>(x.AtStep(step)));
    }
  }
}

// W::kRowScale: the float scale of the row of `slot` (per tensor: scale 0).
template <typename W>
__device__ __forceinline__ float RowScale(const GemvArgs& a, int32_t tile, int slot) {
  if constexpr (W::kRowScale) {
    if (a.w_scale_count == 1) return __ldg(static_cast<const float*>(a.w_scales));
    const int32_t row = min(GemvRow(a.plan.group_rows, tile, slot), a.plan.n - 1);
    return __ldg(static_cast<const float*>(a.w_scales) + row);
  } else {
    return 1.f;
  }
}

// Split tiles: leaves this CTA's sums in the tile's workspace slot; the CTA that arrives last
// gets the sum over all parts in part order (true) and resets the ticket. Uniform over the CTA.
__device__ __forceinline__ bool CombineParts(const GemvArgs& a, Smem& sm, const Item& it,
                                             float* sum) {
  const int tid = threadIdx.x;
  float* slots = a.partials + int64_t{it.tile} * a.plan.parts * kGemvTileOutputs;
  if (tid < kGemvTileOutputs) {
    slots[it.part * kGemvTileOutputs + tid] = *sum;
    __threadfence();
  }
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    const int prev = atomicAdd(a.tickets + it.tile, 1);
    sm.last = prev == a.plan.parts - 1;
    if (sm.last) a.tickets[it.tile] = 0;  // every part has arrived: ready for the next launch
  }
  __syncthreads();
  if (!sm.last) return false;
  __threadfence();
  if (tid < kGemvTileOutputs) {
    float s = 0.f;
    for (int32_t q = 0; q < a.plan.parts; ++q) s += __ldcg(slots + q * kGemvTileOutputs + tid);
    *sum = s;
  }
  return true;
}

// PKV_GEMV_NO_FINISH=1 (CMake option of the same name; timing experiment, never in a shipped
// build: nothing is stored): an item ends without its reduction barrier and epilogue, to bound
// what a barrier-free item finish could gain (bench/NOTES.md "Thirteenth session").
#ifndef PKV_GEMV_NO_FINISH
#define PKV_GEMV_NO_FINISH 0
#endif

// Sums the warps' fragments (warp order), combines split parts, runs the epilogue.
// REQUIRES: called by every thread.
template <typename T, typename W, GemvEpilogue kEp>
__device__ __forceinline__ void FinishItem(const GemvArgs& a, Smem& sm, const Item& it,
                                           const float (&acc)[4]) {
  if constexpr (PKV_GEMV_NO_FINISH) {
    // The sums stay live (a compare the compiler cannot fold) but nothing is stored.
    if (acc[0] + acc[1] + acc[2] + acc[3] == a.plan.n * 3.0e38f) sm.last = 1;
    return;
  }
  const int tid = threadIdx.x, slot = tid >> 3, tok = tid & 7;
  sm.red[tid >> 5][tid & 31] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  float sum = 0.f;
  if (tid < kGemvTileOutputs) {
    const float* r =
        reinterpret_cast<const float*>(&sm.red[0][GemvAccLane(slot, tok)]) + GemvAccElem(slot, tok);
#pragma unroll
    for (int w = 0; w < kGemvWarps; ++w) sum += r[w * 32 * 4];
  }
  if (a.plan.parts > 1 && !CombineParts(a, sm, it, &sum)) return;
  if (tid < kGemvTileOutputs) sm.y[slot][tok] = sum * RowScale<W>(a, it.tile, slot);
  __syncthreads();
  if constexpr (kEp == GemvEpilogue::kStore) {
    StoreEpilogue<T>(a, sm, it.tile);
  } else if constexpr (kEp == GemvEpilogue::kResidual) {
    ResidualEpilogue<T>(a, sm, it.tile);
  } else if constexpr (kEp == GemvEpilogue::kRopeKv) {
    RopeKvEpilogue<T>(a, sm, it.tile);
  } else {
    SiluMulEpilogue<T>(a, sm, it.tile);
  }
  // The next item writes sm.red, then (after a barrier every thread reaches only once done
  // here) sm.y: no barrier needed at the end.
}

// An item's last full batch refills its halves from the next item's first batch: 4-bit weights
// under normalized input (q/k/v, gate/up), where an 8B gate/up warp runs one batch an item and so
// otherwise has nothing in flight while it computes. Measured on the H200 with it in every 4-bit
// and fp8 kernel (bench/NOTES.md, "Fourteenth session", xhalf): 8B gate/up 4-bit T=1 24.5 -> 23.2
// us, T=8 -4%, e2e AWQ B=1 -1.9%; but o and down (plain input, one item a CTA) +2-5% and the fp8
// kernels +1-8% (e2e FP8 B=8 +6%), so only these kernels take it (the others compile to the same
// PTX as without it). PKV_GEMV_CROSS_HALVES=0 turns it off (timing builds).
#ifndef PKV_GEMV_CROSS_HALVES
#define PKV_GEMV_CROSS_HALVES 1
#endif
template <typename W, GemvInput kIn>
inline constexpr bool kCrossHalves = (PKV_GEMV_CROSS_HALVES != 0) &&
                                     (W::kFormat == GemvWeightFormat::kInt4) &&
                                     (kIn == GemvInput::kRmsNorm);

// kB: units a batch (kBatch, or kGemvDeepBatchUnits for a deep plan's kernels).
template <typename T, typename W, GemvInput kIn, GemvEpilogue kEp, bool kStage, int kB = kBatch>
__global__ void __launch_bounds__(kThreads, (kGemvMinCtas<W, kB>)) GemvKernel(const GemvArgs a) {
  __shared__ Smem sm;
  extern __shared__ uint4 xs[];  // kStage: [a.tokens][GemvStageRowVecs(span.len)] (StageX)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  Batch<kB> b;
  int32_t item = blockIdx.x;  // < a.plan.items: the grid never exceeds the items
  // Before the dependency wait: weights never depend on earlier kernels, so the first batch of
  // the first item is in flight while the previous kernel drains.
  bool preloaded = false;
  {
    const Item it = MakeItem<W>(a, item, warp, g);
    if (it.steps.begin < it.steps.end) {
      LoadBatch<W>(it, it.steps.begin, c, b);
      preloaded = true;
    }
    if (a.prefetch_steps > 0) PrefetchL2(it, it.steps.begin + kB, a.prefetch_steps, c);
  }
  PdlWait();
  PdlTrigger();
  // Lanes of tokens >= a.tokens read token tokens - 1's inputs (same addresses as other lanes:
  // no extra traffic), so the loop has no divergent branch before its warp-wide MMAs; their MMA
  // columns (C column g) hold sums no epilogue reads, and no column feeds another.
  const int gx = min(g, a.tokens - 1);
  float inv = 0.f;
  if constexpr (kIn == GemvInput::kRmsNorm) {
    ComputeInv(a, sm);
    inv = sm.inv[gx];
  }
  const GemvKSpan span = GemvStageSpan(a.plan, blockIdx.x);
  const int32_t row_vecs = GemvStageRowVecs(span.len);
  using M = GemvMmaT<T, W>;  // staged x is stored as the MMA's operand type
  if constexpr (kStage) {
    StageX<T, M, kIn, kThreads>(a, span, row_vecs, sm.inv, xs);
    __syncthreads();
  }
  constexpr bool kCross = kCrossHalves<W, kIn>;
  const XSource<T, M, kIn, kStage> x{a, xs + gx * row_vecs + c - (span.begin >> 3), c, gx, inv};
  for (; item < a.plan.items; item += gridDim.x) {
    const Item it = MakeItem<W>(a, item, warp, g);
    Item next;  // made before the K loop only where its last batch loads from it
    if constexpr (kCross) {
      if (item + static_cast<int32_t>(gridDim.x) < a.plan.items) {
        next = MakeItem<W>(a, item + gridDim.x, warp, g);
      }
    }
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int32_t s = it.steps.begin; s < it.steps.end; s += kB) {
      if (!preloaded) LoadBatch<W>(it, s, c, b);
      preloaded = false;  // kRefillHalves: set again when the batch refilled its slots
      if (s + kB <= it.steps.end) {
        // A full batch without branches, so the units' loads of x and (kUnitScale) their
        // independent MMA chains interleave.
        if constexpr (kRefillHalves<W>) {
          // Each half's slots take the next batch's loads as soon as their units are computed,
          // so the warp's loads stay in flight through the compute of the other half.
          // kCross: the item's last batch takes the next item's first batch the same way.
          const bool more = s + kB < it.steps.end;
          const bool cross = kCross && !more && next.steps.begin < next.steps.end;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int u = h * kB / 2; u < (h + 1) * kB / 2; ++u) {
              ComputeUnit<T, W>(x, s + u, b.va[u], b.vb[u], b.sa[u], b.sb[u], acc);
            }
            if (more) LoadUnits<W>(it, s + kB, h * kB / 2, (h + 1) * kB / 2, c, b);
            if constexpr (kCross) {
              if (cross) LoadUnits<W>(next, next.steps.begin, h * kB / 2, (h + 1) * kB / 2, c, b);
            }
          }
          preloaded = more;
          if constexpr (kCross) preloaded = preloaded || cross;
        } else {
#pragma unroll
          for (int u = 0; u < kB; ++u) {
            ComputeUnit<T, W>(x, s + u, b.va[u], b.vb[u], b.sa[u], b.sb[u], acc);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < kB; ++u) {
          if (s + u < it.steps.end) {
            ComputeUnit<T, W>(x, s + u, b.va[u], b.vb[u], b.sa[u], b.sb[u], acc);
          }
        }
      }
    }
    // The next item's first batch goes out before this item's reduction barrier and epilogue,
    // so the SM's loads do not drain at every item boundary (kCross: out already unless the last
    // batch was partial).
    if (item + static_cast<int32_t>(gridDim.x) < a.plan.items && !(kCross && preloaded)) {
      if constexpr (!kCross) next = MakeItem<W>(a, item + gridDim.x, warp, g);
      if (next.steps.begin < next.steps.end) {
        LoadBatch<W>(next, next.steps.begin, c, b);
        preloaded = true;
      }
    }
    FinishItem<T, W, kEp>(a, sm, it, acc);
  }
  TimelineExitMark();
}

// The x bytes a launch of `a` stages (gemv.h: GemvStagedXBytes; none in PKV_GEMV_X_CONST builds).
inline int64_t StagedXBytes(const GemvArgs& a) {
  return PKV_GEMV_X_CONST ? 0 : GemvStagedXBytes(a);
}

// Calls fn(kernel) with the instantiation for (a.input, a.epilogue, kStage); INVALID_ARGUMENT for
// a combination the model does not use.
template <typename T, typename W, bool kStage, typename Fn>
absl::Status WithGemvKernel(GemvInput in, GemvEpilogue ep, Fn&& fn) {
  using In = GemvInput;
  using Ep = GemvEpilogue;
  if (in == In::kPlain && ep == Ep::kStore) {
    return fn(GemvKernel<T, W, In::kPlain, Ep::kStore, kStage>);
  }
  if (in == In::kRmsNorm && ep == Ep::kStore) {
    return fn(GemvKernel<T, W, In::kRmsNorm, Ep::kStore, kStage>);
  }
  if (in == In::kPlain && ep == Ep::kResidual) {
    return fn(GemvKernel<T, W, In::kPlain, Ep::kResidual, kStage>);
  }
  // q/k/v and gate/up take their block input normalized (rmsnorm) or, with a step's rows
  // normalized by one RMSNorm launch before them (CudaBackendOptions::fused_prenorm_min_tokens),
  // plain.
  if (ep == Ep::kRopeKv) {
    return in == In::kRmsNorm ? fn(GemvKernel<T, W, In::kRmsNorm, Ep::kRopeKv, kStage>)
                              : fn(GemvKernel<T, W, In::kPlain, Ep::kRopeKv, kStage>);
  }
  if (ep == Ep::kSiluMul) {
    return in == In::kRmsNorm ? fn(GemvKernel<T, W, In::kRmsNorm, Ep::kSiluMul, kStage>)
                              : fn(GemvKernel<T, W, In::kPlain, Ep::kSiluMul, kStage>);
  }
  return absl::InvalidArgumentError(
      "gemv: supported (input, epilogue) pairs: (plain, store), (rmsnorm, store), (plain, "
      "residual), (rmsnorm or plain, rope_kv), (rmsnorm or plain, silu_mul)");
}

// Launches the instantiation for (a.input, a.epilogue), staging x when it fits. Instantiated
// once per (dtype, weight format) by gemv_<format>_<dtype>.cu. Deep plans (GemvPlan::deep) of
// plain, unstaged input take the deep-batch kernels: the fused path's o and down projections
// (residual) and plain stores. The normalized-input projections (q/k/v, gate/up) keep one kernel
// each: their deep plans occur only on small models, where the staged x they use matters more.
template <typename T, typename W>
absl::Status LaunchGemvTyped(const GemvArgs& a, cudaStream_t stream) {
  if constexpr (W::kFormat == GemvWeightFormat::kDense) {
    if (a.bulk) {  // one-token dense launches that fit: the bulk-copy kernel (gemv_bulk.cuh)
      const int32_t bulk_grid = BulkGrid(a);
      if (BulkFits(a, bulk_grid)) return LaunchGemvBulk<T>(a, bulk_grid, stream);
    }
  }
  const dim3 grid(a.plan.grid), block(kThreads);
  const int64_t stage_bytes = StagedXBytes(a);
  auto launch = [&](auto kernel) {
    return CudaStatus(
        LaunchMaybePdl(kernel, grid, block, static_cast<size_t>(stage_bytes), stream, a.pdl, a),
        "GemvKernel");
  };
  if constexpr (W::kFormat != GemvWeightFormat::kInt4) {
    if (a.plan.deep && stage_bytes == 0 && a.input == GemvInput::kPlain) {
      constexpr int kDeep = kGemvDeepBatchUnits;
      if (a.epilogue == GemvEpilogue::kResidual) {
        return launch(GemvKernel<T, W, GemvInput::kPlain, GemvEpilogue::kResidual, false, kDeep>);
      }
      if (a.epilogue == GemvEpilogue::kStore) {
        return launch(GemvKernel<T, W, GemvInput::kPlain, GemvEpilogue::kStore, false, kDeep>);
      }
    }
  }
  if (stage_bytes > 0) return WithGemvKernel<T, W, true>(a.input, a.epilogue, launch);
  return WithGemvKernel<T, W, false>(a.input, a.epilogue, launch);
}

// The least resident-CTAs-per-SM over the instantiations of (T, W) (they differ in registers),
// and the largest static shared memory among them; lets the staged ones take dynamic shared
// memory up to `stage_optin` (the device's opt-in maximum per CTA, static memory included) on
// the current device, and for dense weights the bulk kernels theirs (AllowBulkSmem).
template <typename T, typename W>
absl::Status GemvCtasPerSm(int stage_optin, int* ctas, int* static_smem) {
  int least = 1 << 30, most_static = 0;
  auto query = [&](auto kernel) -> absl::Status {
    int n = 0;
    PKV_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, 0));
    cudaFuncAttributes attr;
    PKV_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    least = n < least ? n : least;
    most_static = static_cast<int>(attr.sharedSizeBytes) > most_static
                      ? static_cast<int>(attr.sharedSizeBytes)
                      : most_static;
    return absl::OkStatus();
  };
  auto query_staged = [&](auto kernel) -> absl::Status {
    // The opt-in limit covers static plus dynamic shared memory: more is cudaErrorInvalidValue.
    cudaFuncAttributes attr;
    PKV_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    PKV_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             stage_optin - static_cast<int>(attr.sharedSizeBytes)));
    return query(kernel);
  };
  using In = GemvInput;
  using Ep = GemvEpilogue;
  for (auto [in, ep] : {std::pair{In::kPlain, Ep::kStore}, std::pair{In::kRmsNorm, Ep::kStore},
                        std::pair{In::kPlain, Ep::kResidual}, std::pair{In::kRmsNorm, Ep::kRopeKv},
                        std::pair{In::kRmsNorm, Ep::kSiluMul}, std::pair{In::kPlain, Ep::kRopeKv},
                        std::pair{In::kPlain, Ep::kSiluMul}}) {
    PKV_RETURN_IF_ERROR((WithGemvKernel<T, W, false>(in, ep, query)));
    PKV_RETURN_IF_ERROR((WithGemvKernel<T, W, true>(in, ep, query_staged)));
  }
  if constexpr (W::kFormat == GemvWeightFormat::kDense)
    PKV_RETURN_IF_ERROR(AllowBulkSmem<T>(stage_optin));
  *ctas = least;
  *static_smem = most_static;
  return absl::OkStatus();
}

}  // namespace pkv::gpu::gemv
