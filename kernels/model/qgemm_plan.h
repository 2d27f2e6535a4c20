// The quantized-weight GEMM ("QGemm", kernels/model/qgemm.h) for steps of more tokens than the
// fused GEMV takes: its tiling, the split-K planner and the route rule against dequantize +
// cuBLAS. Plain C++ (host planner, shared with the kernel and the host tests).
//
// y[m][n] = sum_k x[m][k] * w[n][k] reads the GEMV's packed weights (gemv_quant.h: 4-bit groups
// or fp8 e4m3, the same bytes, no second copy) and dequantizes them in registers with the GEMV's
// load policies (gemv_weights.cuh) before m16n8k16 tensor-core MMAs with fp32 accumulation. As in
// the GEMV the weight is the MMA's A operand (16 rows) and the tokens its B operand (8 columns),
// so a fragment of packed weights expands once and feeds every token group of the tile.
//
// Decomposition:
//   stage : 128 consecutive k (one 4-bit unit, two fp8 units). A CTA copies the stage's packed
//           weights of its 256 rows and its 64 tokens' x into shared memory with cp.async, a
//           ring of `stages` slots deep, so loads of later stages overlap the MMAs of this one.
//   tile  : 256 weight rows x 64 tokens; warp w owns rows 32 w .. 32 w + 31 (two A fragments)
//           against all 64 tokens (8 B fragments): 16 MMAs per 16 k, 64 fp32 accumulators.
//   part  : 1 / parts of the K stages; an item = (row tile, token tile, part) = one CTA. Items
//           are numbered token tile fastest, so the CTAs that share a weight tile run together
//           and all but the first read it from L2.
// With parts > 1 each CTA leaves its 256 x 64 fp32 sums in a workspace slot and the last CTA of
// the tile (a ticket, as in the GEMV) adds the slots in part order: every output is summed in the
// same order on every run.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/model/gemv_plan.h"

namespace pkv::gpu {

inline constexpr int32_t kQGemmWarps = 8;
inline constexpr int32_t kQGemmThreads = kQGemmWarps * 32;
inline constexpr int32_t kQGemmTileRows = 256;   // weight rows per CTA (32 per warp)
inline constexpr int32_t kQGemmTileTokens = 64;  // tokens per CTA (8 MMA column groups)
inline constexpr int32_t kQGemmStageK = 128;     // k per pipeline stage
inline constexpr int32_t kQGemmMaxParts = 16;
inline constexpr int32_t kQGemmMinStagesPerPart = 2;  // 256 k
inline constexpr int32_t kQGemmMaxStages = 4;         // cp.async ring depth limit

// Shared memory of one ring slot: x [64 tokens][128 k] 16-bit, the 256 rows' packed weights of
// the stage (4-bit: 64 bytes a row; fp8: 128), and the 4-bit scale words (one per row).
PKV_HOST_DEVICE constexpr int32_t QGemmStageBytes(GemvWeightFormat f) {
  return kQGemmTileTokens * kQGemmStageK * 2 +
         kQGemmTileRows * (f == GemvWeightFormat::kInt4 ? kQGemmStageK / 2 + 4 : kQGemmStageK);
}

// Resident CTAs per SM the kernel is built for (its register budget: 128 per thread at 2).
// 4-bit: 2, so one CTA's barrier waits overlap the other's MMAs. fp8: 1, because its e4m3
// expansion spills ~150 bytes per thread at 128 registers; the deeper ring covers its latency.
PKV_HOST_DEVICE constexpr int32_t QGemmCtasPerSm(GemvWeightFormat f) {
  return f == GemvWeightFormat::kInt4 ? 2 : 1;
}

// The device as the planner sees it (queried once by QueryQGemmDevice: the planner is pure).
struct QGemmDevice {
  int32_t num_sms = 0;
  int32_t smem_per_sm = 0;       // bytes of shared memory per SM
  int32_t smem_per_block = 0;    // the opt-in limit of one CTA
  int32_t smem_reserved = 1024;  // the driver's per-CTA reservation
};

struct QGemmPlan {
  int32_t m = 0, n = 0, k = 0;
  GemvWeightFormat format = GemvWeightFormat::kInt4;
  int32_t row_tiles = 0;    // ceil(n / 256)
  int32_t token_tiles = 0;  // ceil(m / 64)
  int32_t k_stages = 0;     // k / 128
  int32_t parts = 1;
  int32_t items = 0;        // row_tiles * token_tiles * parts = the grid
  int32_t stages = 2;       // cp.async ring depth
  int32_t smem_bytes = 0;   // stages * QGemmStageBytes(format)
  int32_t ctas_per_sm = 1;  // resident CTAs per SM the shared memory allows
  int32_t tiles() const { return row_tiles * token_tiles; }
  // Split workspace: one 256 x 64 float slot per item, one ticket per tile.
  int64_t partial_floats() const {
    return parts > 1 ? int64_t{items} * kQGemmTileRows * kQGemmTileTokens : 0;
  }
  int32_t num_tickets() const { return parts > 1 ? tiles() : 0; }
  // Packed weight bytes one launch reads once (what the byte floor counts).
  int64_t weight_bytes() const { return int64_t{n} * GemvRowBytes(format, k); }
};

// Whether the QGemm runs a projection of this shape: a 4-bit or fp8 format and k a multiple of
// 128 (every Llama projection; the dequantize path takes the rest).
bool QGemmSupports(GemvWeightFormat format, int64_t n, int64_t k);

// The split-K factor. Measured (bench/results/2026-12-02-h200-w4gemm): a stage costs a CTA ~3 us
// whatever the token count and format (the ring depth, L2 hints and prefetch do not move it), so
// the fewer stages per CTA the better until the items overflow one wave of resident CTAs. Rule:
// the largest parts with tiles * parts <= num_sms * ctas_per_sm (one wave), at least 1, capped so
// a part keeps >= 2 stages and at 16. Worked examples on 132 SMs (4-bit: 2 CTAs per SM = 264
// slots; fp8: 1 = 132), each the measured best of the sweep 1, 2, 4, 8, 16 or next to it:
//   8B o_proj  M=16  (16 tiles, 32 stages): 4-bit 16 (17.9 us; 8: 20.1), fp8 8 (18.8 us)
//   8B down    M=16  (16 tiles, 112 stages): 4-bit 16 (42.2 us; 9: 66.0), fp8 8 (44.6 us)
//   8B gate/up M=64  (112 tiles): 4-bit 2 (99.6 us), fp8 1 (88.6 us; 2: 111.1)
//   8B qkv     M=16  (24 tiles): 4-bit 11 (8: 24.8 us, 16: 25.6), fp8 5 (4: 27.7 us)
int32_t ChooseQGemmParts(int32_t tiles, int32_t k_stages, int32_t slots);

// The ring depth: as many stages as fit in the SM's shared memory shared by QGemmCtasPerSm CTAs,
// 2..4, within one CTA's limit. H200 (228 KB per SM): 4-bit 3 stages (99 KB, two CTAs), fp8 4
// (192 KB, one CTA); sm_86 / sm_89 (100 KB per SM): 2 stages, one CTA per SM.
int32_t ChooseQGemmStages(GemvWeightFormat format, const QGemmDevice& d);

// The plan of one launch. `parts` > 0 forces the split factor (benchmarks); 0 applies the rule.
// INVALID_ARGUMENT when the shape is unsupported (QGemmSupports), m < 1, the device has no SMs,
// or two ring stages do not fit one CTA's shared memory.
absl::StatusOr<QGemmPlan> PlanQGemm(int32_t m, int32_t n, int32_t k, GemvWeightFormat format,
                                    const QGemmDevice& d, int32_t parts = 0);

// How a projection of a packed (quantized) weight runs in a step of `tokens` tokens outside the
// fused GEMV: the QGemm, or dequantize into scratch + cuBLAS. Measured on the H200 (the QGemm at
// its rule's split against dequantize + autotuned cuBLAS, 8B shapes, bench/NOTES.md w4gemm): the
// QGemm wins every projection up to 32 tokens (e.g. o_proj 4-bit M=32: 22.1 vs 22.9 us, gate/up
// 82.9 vs 146.1); at 64 only the large ones, where the dequantize pass writes and re-reads the
// most (gate/up 97 vs 147 us, down 64 vs 79; qkv 35 vs 34, o 29 vs 22); at 128 none (gate/up
// 159 vs 150). Rule: the QGemm for tokens <= kQGemmSmallTokens, and for tokens <=
// kQGemmMaxRouteTokens when n * k >= kQGemmLargeWeights; dequantize + cuBLAS otherwise.
// Worked examples: 8B gate/up (28672 x 4096 = 117M) at 64 tokens -> QGemm; 8B qkv (6144 x 4096
// = 25M) at 64 -> dequantize; any projection at 20 tokens -> QGemm; 65 tokens -> dequantize.
inline constexpr int32_t kQGemmSmallTokens = 32;
inline constexpr int32_t kQGemmMaxRouteTokens = 64;
inline constexpr int64_t kQGemmLargeWeights = 50'000'000;
enum class PackedRoute : int32_t { kQGemm = 0, kDequantCublas = 1 };
PackedRoute ChoosePackedRoute(int64_t tokens, GemvWeightFormat format, int64_t n, int64_t k);

}  // namespace pkv::gpu
