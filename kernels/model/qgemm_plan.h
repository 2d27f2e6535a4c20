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
//   stage : one full 128-byte line of every weight row: 256 k of 4-bit weights (two 128-k units,
//           two scale groups), 128 k of fp8. A CTA copies the stage's packed weights of its 256
//           rows and its tokens' x into shared memory with cp.async, a ring of `stages` slots
//           deep, so loads of later stages overlap the MMAs of this one. Measured (bench/NOTES.md
//           w4gemm, qgemm2): the CTA's time per stage followed the number of 128-byte lines it
//           requested, not the bytes; 64-byte half lines and a 4-byte scale word per row and stage
//           made 4-bit stages ~2 lines per row for 64 bytes.
//   scales: the 4-bit scale words of a CTA's whole part (<= kQGemmMaxPartGroups per row) are
//           copied once, before the ring starts, into a table after the ring (one line or two per
//           row instead of one per row and stage).
//   tile  : 256 weight rows x tile_tokens (16, 32 or 64) tokens; warp w owns rows 32 w .. 32 w +
//           31 (two A fragments) against the tile's tokens (tile_tokens / 8 B fragments). The
//           token tile is a compile-time instantiation, so a 16-token step issues neither the
//           MMAs nor the x copies of the 48 tokens it does not have.
//   part  : 1 / parts of the K stages; an item = (row tile, token tile, part) = one CTA. Items
//           are numbered token tile fastest, so the CTAs that share a weight tile run together
//           and all but the first read it from L2.
// With parts > 1 each CTA leaves its 256 x tile_tokens fp32 sums in a workspace slot and the last
// CTA of the tile (a ticket, as in the GEMV) adds the slots in part order: every output is summed
// in the same order on every run.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/model/gemv_plan.h"

namespace pkv::gpu {

inline constexpr int32_t kQGemmWarps = 8;
inline constexpr int32_t kQGemmThreads = kQGemmWarps * 32;
inline constexpr int32_t kQGemmTileRows = 256;       // weight rows per CTA (32 per warp)
inline constexpr int32_t kQGemmMaxTileTokens = 64;   // tokens per CTA: 16, 32 or 64
inline constexpr int32_t kQGemmRowStageBytes = 128;  // packed bytes per row and stage: one line
inline constexpr int32_t kQGemmMaxParts = 16;
inline constexpr int32_t kQGemmMinStagesPerPart = 2;
inline constexpr int32_t kQGemmMaxStages = 4;  // cp.async ring depth limit
// The scale table holds at most this many 128-k groups per row (a part of 4096 k): the split rule
// raises parts until a part fits (8B down_proj, 112 groups: >= 4 parts).
inline constexpr int32_t kQGemmMaxPartGroups = 32;

// k per stage (a row's 128 bytes: two of the GEMV's 64-byte units): 4-bit 256 (two scale
// groups), fp8 128.
PKV_HOST_DEVICE constexpr int32_t QGemmStageK(GemvWeightFormat f) {
  return f == GemvWeightFormat::kInt4 ? 256 : 128;
}

// Shared memory of one ring slot: x [tile_tokens][stage k] 16-bit and the 256 rows' packed
// weights of the stage (128 bytes a row).
PKV_HOST_DEVICE constexpr int32_t QGemmStageBytes(GemvWeightFormat f, int32_t tile_tokens) {
  return tile_tokens * QGemmStageK(f) * 2 + kQGemmTileRows * kQGemmRowStageBytes;
}

// Resident CTAs per SM the kernel is built for (its register budget: 128 per thread at 2).
// 4-bit tiles of <= 32 tokens: 2, so one CTA's barrier waits overlap the other's MMAs; 64-token
// 4-bit tiles: 1 (64 fp32 accumulators a thread, and a 64 KB stage: two CTAs would not hold two
// stages each). fp8: 1, because its e4m3 expansion spills ~150 bytes per thread at 128 registers.
PKV_HOST_DEVICE constexpr int32_t QGemmCtasPerSm(GemvWeightFormat f, int32_t tile_tokens) {
  return f == GemvWeightFormat::kInt4 && tile_tokens <= 32 ? 2 : 1;
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
  int32_t tile_tokens = 64;  // 16, 32 or 64 (the kernel instantiation)
  int32_t row_tiles = 0;     // ceil(n / 256)
  int32_t token_tiles = 0;   // ceil(m / tile_tokens)
  int32_t k_stages = 0;      // ceil(k / QGemmStageK(format)); a 4-bit k of an odd number of
                             // groups ends in a stage of one unit
  int32_t k_groups = 0;      // k / 128 (4-bit: scale words per row)
  int32_t parts = 1;
  int32_t items = 0;         // row_tiles * token_tiles * parts = the grid
  int32_t stages = 2;        // cp.async ring depth
  int32_t scale_stride = 0;  // 4-bit: words per row of the scale table (odd: no bank conflicts
                             // between the 8 rows a load reads); fp8: 0
  int32_t smem_bytes = 0;    // stages * QGemmStageBytes + the scale table (256 * scale_stride * 4)
  int32_t ctas_per_sm = 1;   // resident CTAs per SM the shared memory allows
  int32_t tiles() const { return row_tiles * token_tiles; }
  int32_t stage_bytes() const { return QGemmStageBytes(format, tile_tokens); }
  int32_t table_bytes() const { return kQGemmTileRows * scale_stride * 4; }
  // Split workspace: one 256 x tile_tokens float slot per item, one ticket per tile.
  int64_t partial_floats() const {
    return parts > 1 ? int64_t{items} * kQGemmTileRows * tile_tokens : 0;
  }
  int32_t num_tickets() const { return parts > 1 ? tiles() : 0; }
  // Packed weight bytes one launch reads once (what the byte floor counts).
  int64_t weight_bytes() const { return int64_t{n} * GemvRowBytes(format, k); }
};

// Stage bounds of part `part` (the kernel's MakeItem and the planner's scale table agree).
PKV_HOST_DEVICE int32_t QGemmPartBegin(int32_t k_stages, int32_t parts, int32_t part) {
  return static_cast<int32_t>(int64_t{part} * k_stages / parts);
}

// Whether the QGemm runs a projection of this shape: a 4-bit or fp8 format, k a multiple of 128
// (every Llama projection; the dequantize path takes the rest) and, for 4-bit, at most
// kQGemmMaxParts * kQGemmMaxPartGroups groups (k <= 65536: every part's scales fit the table).
bool QGemmSupports(GemvWeightFormat format, int64_t n, int64_t k);

// The token tile: the smallest of 16, 32, 64 that holds m tokens (64 above).
int32_t ChooseQGemmTileTokens(int32_t m);

// The split-K factor. A CTA's time is stages times a per-stage cost (w4gemm: ring depth, L2 hints
// and prefetch did not move it), so the fewer stages per CTA the better until the items overflow
// one wave of resident CTAs. Rule: the largest parts with tiles * parts <= slots (num_sms *
// ctas_per_sm: one wave), at least 1, capped so a part keeps >= 2 stages and at 16. Worked
// examples on 132 SMs, 4-bit (256-k stages; 2 CTAs per SM = 264 slots at <= 32 tokens, 132 at
// 64), fp8 (128-k stages; 132 slots), with the 2026-12-03 H200 sweep (qgemm2, 4-bit):
//   8B o_proj  M=16  (16 tiles, 16 stages): 4-bit 8 (11.4 us); fp8 (32 stages) 8
//   8B down    M=16  (16 tiles, 56 stages): 4-bit 16 (23.7 us); fp8 8
//   8B gate/up M=64  (112 tiles): 4-bit 1 (68.7 us; 2: 95.0), fp8 1; M=16: 4-bit 2 (38.7 us)
//   8B qkv     M=16  (24 tiles): 4-bit 8 (11 capped by 16 stages / 2; 13.9 us), fp8 5
// PlanQGemm then raises 4-bit parts until a part's scale groups fit kQGemmMaxPartGroups.
int32_t ChooseQGemmParts(int32_t tiles, int32_t k_stages, int32_t slots);

// The ring depth: as many stages of `stage_bytes` as fit beside `table_bytes` in the SM's shared
// memory shared by `ctas` CTAs, at most 4, within one CTA's limit; < 2 means it does not fit.
// H200 (228 KB per SM): 4-bit 16 tokens 2 stages (2 CTAs), 64 tokens 3 (1 CTA, 32-group table);
// fp8 4 (1 CTA).
int32_t ChooseQGemmStages(int32_t stage_bytes, int32_t table_bytes, int32_t ctas,
                          const QGemmDevice& d);

// The plan of one launch. `parts` > 0 forces the split factor (benchmarks; raised where a 4-bit
// part's scales would not fit the table); 0 applies the rule. Where two stages and the table do
// not fit, the planner takes one CTA per SM, then more parts, then smaller token tiles.
// INVALID_ARGUMENT when the shape is unsupported (QGemmSupports), m < 1, the device has no SMs,
// or nothing fits one CTA's shared memory.
absl::StatusOr<QGemmPlan> PlanQGemm(int32_t m, int32_t n, int32_t k, GemvWeightFormat format,
                                    const QGemmDevice& d, int32_t parts = 0);

// How a projection of a packed (quantized) weight runs in a step of `tokens` tokens outside the
// fused GEMV: the QGemm, or dequantize into scratch + cuBLAS. Measured on the H200 (the QGemm at
// its rule's split against dequantize + autotuned cuBLAS, 8B shapes, 4-bit, bench/NOTES.md
// qgemm2): the QGemm wins every projection up to 32 tokens (o_proj M=32: 16.8 vs 22.9 us, qkv
// 20.2 vs 33.3, gate/up 66.2 vs 145.9, down 34.4 vs 77.6); at 64 only the large ones, where the
// dequantize pass writes and re-reads the most (gate/up 68.7 vs 145.1 us, down 49.6 vs 79.7; qkv
// 34.3 vs 33.3, o 27.1 vs 21.8; the QGemm for all four made the bimodal B=64 AWQ step 0.7 ms
// slower); at 128 none (w4gemm: gate/up 159 vs 150). Rule: the QGemm for tokens <=
// kQGemmSmallTokens, and for tokens <= kQGemmMaxRouteTokens when n * k >= kQGemmLargeWeights;
// dequantize + cuBLAS otherwise. Worked examples: 8B gate/up (28672 x 4096 = 117M) at 64 tokens
// -> QGemm; 8B qkv (6144 x 4096 = 25M) at 64 -> dequantize; any projection at 20 tokens ->
// QGemm; 65 tokens -> dequantize.
inline constexpr int32_t kQGemmSmallTokens = 32;
inline constexpr int32_t kQGemmMaxRouteTokens = 64;
inline constexpr int64_t kQGemmLargeWeights = 50'000'000;
enum class PackedRoute : int32_t { kQGemm = 0, kDequantCublas = 1 };
PackedRoute ChoosePackedRoute(int64_t tokens, GemvWeightFormat format, int64_t n, int64_t k);

}  // namespace pkv::gpu
