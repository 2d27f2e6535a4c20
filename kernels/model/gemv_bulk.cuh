// The one-token dense GEMV fed by bulk copies (GemvArgs::bulk; included by gemv_kernel.cuh).
//
// Why: the register-batch kernel streams an 8B gate/up at ~0.85 of the read floor; per-lane
// cp.async rings lost to the MIO queue (bench/NOTES.md "w4speed", "Thirteenth session"). A bulk
// copy (cp.async.bulk, sm_90) moves a 2 KB chunk of one weight row into shared memory from one
// lane and completes on an mbarrier, so the only MIO traffic left is the consumer's LDS. Measured
// standalone (bench/device/tma_gemv_probe.cu, results/2026-12-06-h200-call22): 8B gate/up 4.4%
// and down 7.0% faster than GemvKernel in the same call, qkv and o 5% slower (a short launch
// ramps faster from registers), so the fused path asks for it on gate/up and down only.
//
// Decomposition: CTA b takes tiles [b tiles / grid, (b + 1) tiles / grid) (GemvRow's 16 slots
// each); its tiles' row pairs (slots p, p + 8: a SiLU or RoPE pair) are split into 8 contiguous
// runs, one a warp. A warp streams its rows whole, row after row, through its own ring of
// kBulkSlots chunks: lane 0 issues the first kBulkSlots copies before the PDL wait (weights never
// depend on the previous kernel) and refills a slot as soon as the warp has read it. Each lane
// sums its 8 products of a 16-byte word pair (weights, staged x) in fp32, two chains; at a row's
// end the warp adds its lanes (xor tree) into the row's sum. The CTA's sums then go through the
// tile epilogues of gemv_epilogue.cuh unchanged (FinishItem's form: Smem::y, token 0).
// Numerics: a fixed order per row (lane chains, then the tree), the same bits on every run; not
// the MMA kernel's order, so one-token sums differ from GemvKernel's by fp32 rounding (the fused
// path is off in deterministic mode, so batch invariance is not at stake).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/pdl.cuh"
#include "kernels/model/gemv.h"
#include "kernels/model/gemv_epilogue.cuh"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/gemv_x.cuh"
#include "kernels/model/model_device.cuh"

namespace pkv::gpu::gemv {

constexpr int kBulkChunk = 2048;   // bytes a copy; a row's bytes must be a multiple
constexpr int kBulkSlots = 4;      // chunks a warp's ring holds (3 in flight while one is read)
constexpr int kBulkCtasPerSm = 2;  // the probe's best (c2048 s4 w8 x2)
constexpr int kBulkMaxCtaSmem = 110 * 1024;  // two CTAs an H100/H200 SM
constexpr int kBulkThreads = kGemvWarps * 32;

// Dynamic shared memory of a CTA: staged x (row 0 of StageX's layout), the warps' rings, their
// mbarriers, the CTA's row sums [tiles_per_cta][16].
__host__ __device__ inline int32_t BulkXBytes(int32_t k) {
  return (GemvStageRowVecs(k) * 16 + 127) & ~127;
}
__host__ __device__ inline int32_t BulkRingOffset(int32_t k) { return BulkXBytes(k); }
__host__ __device__ inline int32_t BulkBarOffset(int32_t k) {
  return BulkRingOffset(k) + kGemvWarps * kBulkSlots * kBulkChunk;
}
__host__ __device__ inline int32_t BulkSumOffset(int32_t k) {
  return BulkBarOffset(k) + kGemvWarps * kBulkSlots * 8;
}
inline int64_t BulkSmemBytes(int32_t k, int32_t tiles_per_cta) {
  return BulkSumOffset(k) + int64_t{tiles_per_cta} * kGemvTileRows * 4;
}

// CTAs of a bulk launch: kBulkCtasPerSm a streaming multiprocessor of the plan's device, at
// most one a tile.
inline int32_t BulkGrid(const GemvArgs& a) {
  const int32_t slots = a.plan.num_sms * kBulkCtasPerSm;
  return a.plan.tiles < slots ? a.plan.tiles : slots;
}

// Whether a launch of `a` can take the bulk kernel: asked for, one token, dense weights, rows of
// whole chunks, and the CTA's shared memory within two an SM.
inline bool BulkFits(const GemvArgs& a, int32_t grid) {
  if (!a.bulk || a.tokens != 1 || a.plan.format != GemvWeightFormat::kDense) return false;
  if ((int64_t{a.plan.k} * 2) % kBulkChunk != 0 || grid < 1) return false;
  const int32_t tiles_per_cta = (a.plan.tiles + grid - 1) / grid;
  return BulkSmemBytes(a.plan.k, tiles_per_cta) <= kBulkMaxCtaSmem;
}

__device__ __forceinline__ uint32_t BulkSmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The sm_90 instructions; empty elsewhere (the launcher only takes this kernel where PdlUsable,
// i.e. sm_90 code is loaded).
__device__ __forceinline__ void BulkIssue(uint32_t bar, uint32_t dst, const void* src,
                                          uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kBulkChunk)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
      "l"(src), "r"(kBulkChunk), "r"(bar), "l"(policy)
      : "memory");
#endif
}

__device__ __forceinline__ void BulkWait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n"
      "BULK_WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra BULK_WAIT_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Two 16-bit values of a 32-bit word as floats.
template <typename T>
__device__ __forceinline__ float2 BulkPair(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
}

template <typename T>
__device__ __forceinline__ void BulkDot(const uint4& w, const uint4& x, float& s0, float& s1) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = BulkPair<T>(wv[i]), b = BulkPair<T>(xv[i]);
    s0 = fmaf(a.x, b.x, s0);
    s1 = fmaf(a.y, b.y, s1);
  }
}

// A position in a warp's chunk sequence: pair q of the CTA's tiles, its half h (slot p or
// p + 8), chunk kc of that row.
struct BulkCursor {
  int32_t q, h, kc;
  __device__ __forceinline__ void Advance(int32_t chunks_per_row) {
    if (++kc == chunks_per_row) {
      kc = 0;
      if (++h == 2) {
        h = 0;
        ++q;
      }
    }
  }
};

template <typename T, GemvInput kIn, GemvEpilogue kEp>
__global__ void __launch_bounds__(kBulkThreads, kBulkCtasPerSm) GemvBulkKernel(const GemvArgs a) {
  __shared__ Smem sm;
  extern __shared__ __align__(128) uint8_t bulk_smem[];
  const GemvPlan& p = a.plan;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t t0 = static_cast<int32_t>(int64_t{blockIdx.x} * p.tiles / gridDim.x);
  const int32_t t1 = static_cast<int32_t>(int64_t{blockIdx.x + 1} * p.tiles / gridDim.x);
  const int32_t pairs = (t1 - t0) * 8;
  const int32_t q0 = warp * pairs / kGemvWarps, q1 = (warp + 1) * pairs / kGemvWarps;
  const int32_t cpr = p.k * 2 / kBulkChunk;
  const int32_t nchunks = (q1 - q0) * 2 * cpr;
  const int64_t row_bytes = int64_t{p.k} * 2;
  uint4* xs = reinterpret_cast<uint4*>(bulk_smem);
  uint8_t* ring = bulk_smem + BulkRingOffset(p.k) + warp * kBulkSlots * kBulkChunk;
  uint64_t* bars = reinterpret_cast<uint64_t*>(bulk_smem + BulkBarOffset(p.k)) + warp * kBulkSlots;
  float* sums = reinterpret_cast<float*>(bulk_smem + BulkSumOffset(p.k));
  // Masked slots of a last partial tile stream row n - 1 (as GemvKernel) and are never stored.
  auto source = [&](const BulkCursor& c) {
    const int32_t row = min(GemvPlanRow(p, t0 + c.q / 8, c.q % 8 + 8 * c.h), p.n - 1);
    return static_cast<const uint8_t*>(a.w) + row * row_bytes + int64_t{c.kc} * kBulkChunk;
  };
  uint64_t policy = 0;
  BulkCursor pc{q0, 0, 0};  // the next chunk to issue (lane 0)
  if (lane == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    for (int s = 0; s < kBulkSlots; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(BulkSmemAddr(bars + s))
                   : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    for (int s = 0; s < kBulkSlots && s < nchunks; ++s) {
      BulkIssue(BulkSmemAddr(bars + s), BulkSmemAddr(ring + s * kBulkChunk), source(pc), policy);
      pc.Advance(cpr);
    }
  }
  __syncwarp();
  PdlWait();
  PdlTrigger();
  if constexpr (kIn == GemvInput::kRmsNorm) ComputeInv(a, sm);
  StageX<T, T, kIn, kBulkThreads>(a, GemvKSpan{0, p.k}, GemvStageRowVecs(p.k), sm.inv, xs);
  __syncthreads();

  BulkCursor cc{q0, 0, 0};
  float s0 = 0.f, s1 = 0.f;
  int slot = 0;
  uint32_t parity = 0;
  constexpr int kWords = kBulkChunk / 512;  // 16-byte words a lane reads of a chunk
  for (int32_t c = 0; c < nchunks; ++c) {
    BulkWait(BulkSmemAddr(bars + slot), parity);
    const uint4* wc = reinterpret_cast<const uint4*>(ring + slot * kBulkChunk);
    const uint4* xc = xs + cc.kc * (kBulkChunk / 16);
    uint4 wv[kWords], xv[kWords];
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      wv[j] = wc[j * 32 + lane];
      xv[j] = xc[j * 32 + lane];
    }
    __syncwarp();  // every lane has read the slot: it may be refilled
    if (lane == 0 && c + kBulkSlots < nchunks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
      BulkIssue(BulkSmemAddr(bars + slot), BulkSmemAddr(ring + slot * kBulkChunk), source(pc),
                policy);
      pc.Advance(cpr);
    }
#pragma unroll
    for (int j = 0; j < kWords; ++j) BulkDot<T>(wv[j], xv[j], s0, s1);
    if (++slot == kBulkSlots) {
      slot = 0;
      parity ^= 1u;
    }
    if (cc.kc == cpr - 1) {
      float s = s0 + s1;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) sums[(cc.q / 8) * kGemvTileRows + cc.q % 8 + 8 * cc.h] = s;
      s0 = s1 = 0.f;
    }
    cc.Advance(cpr);
  }
  __syncthreads();
  const int tid = threadIdx.x, tslot = tid >> 3, tok = tid & 7;
  for (int32_t lt = 0; lt < t1 - t0; ++lt) {
    if (tid < kGemvTileOutputs)
      sm.y[tslot][tok] = tok == 0 ? sums[lt * kGemvTileRows + tslot] : 0.f;
    __syncthreads();
    if constexpr (kEp == GemvEpilogue::kStore) {
      StoreEpilogue<T>(a, sm, t0 + lt);
    } else if constexpr (kEp == GemvEpilogue::kResidual) {
      ResidualEpilogue<T>(a, sm, t0 + lt);
    } else if constexpr (kEp == GemvEpilogue::kRopeKv) {
      RopeKvEpilogue<T>(a, sm, t0 + lt);
    } else {
      SiluMulEpilogue<T>(a, sm, t0 + lt);
    }
    __syncthreads();  // the next tile rewrites sm.y
  }
  TimelineExitMark();
}

// Calls fn(kernel) with the bulk kernel of (in, ep).
template <typename T, typename Fn>
absl::Status WithBulkKernel(GemvInput in, GemvEpilogue ep, Fn&& fn) {
  using In = GemvInput;
  using Ep = GemvEpilogue;
  const bool rms = in == In::kRmsNorm;
  switch (ep) {
    case Ep::kStore:
      return rms ? fn(GemvBulkKernel<T, In::kRmsNorm, Ep::kStore>)
                 : fn(GemvBulkKernel<T, In::kPlain, Ep::kStore>);
    case Ep::kResidual:
      return rms ? fn(GemvBulkKernel<T, In::kRmsNorm, Ep::kResidual>)
                 : fn(GemvBulkKernel<T, In::kPlain, Ep::kResidual>);
    case Ep::kRopeKv:
      return rms ? fn(GemvBulkKernel<T, In::kRmsNorm, Ep::kRopeKv>)
                 : fn(GemvBulkKernel<T, In::kPlain, Ep::kRopeKv>);
    case Ep::kSiluMul:
      return rms ? fn(GemvBulkKernel<T, In::kRmsNorm, Ep::kSiluMul>)
                 : fn(GemvBulkKernel<T, In::kPlain, Ep::kSiluMul>);
  }
  return absl::InvalidArgumentError("gemv: unknown epilogue for the bulk kernel");
}

// Lets every bulk kernel of T take up to kBulkMaxCtaSmem of dynamic shared memory (less where
// the device's opt-in maximum `optin` is smaller) on the current device: once per device, from
// QueryGemvDevice, not per launch.
template <typename T>
absl::Status AllowBulkSmem(int optin) {
  auto allow = [&](auto kernel) -> absl::Status {
    cudaFuncAttributes attr;
    PKV_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, kernel));
    const int most = optin - static_cast<int>(attr.sharedSizeBytes);
    PKV_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  most < kBulkMaxCtaSmem ? most : kBulkMaxCtaSmem));
    return absl::OkStatus();
  };
  for (GemvInput in : {GemvInput::kPlain, GemvInput::kRmsNorm}) {
    for (GemvEpilogue ep : {GemvEpilogue::kStore, GemvEpilogue::kResidual, GemvEpilogue::kRopeKv,
                            GemvEpilogue::kSiluMul}) {
      PKV_RETURN_IF_ERROR(WithBulkKernel<T>(in, ep, allow));
    }
  }
  return absl::OkStatus();
}

// Launches the bulk kernel for (a.input, a.epilogue) on `grid` CTAs. REQUIRES: BulkFits(a, grid)
// and AllowBulkSmem on this device (QueryGemvDevice of the dense format did it).
template <typename T>
absl::Status LaunchGemvBulk(const GemvArgs& a, int32_t grid, cudaStream_t stream) {
  const int32_t tiles_per_cta = (a.plan.tiles + grid - 1) / grid;
  const size_t smem = static_cast<size_t>(BulkSmemBytes(a.plan.k, tiles_per_cta));
  return WithBulkKernel<T>(a.input, a.epilogue, [&](auto kernel) {
    return CudaStatus(
        LaunchMaybePdl(kernel, dim3(grid), dim3(kBulkThreads), smem, stream, a.pdl, a),
        "GemvBulkKernel");
  });
}

}  // namespace pkv::gpu::gemv
