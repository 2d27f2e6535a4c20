// The few-token projection ("GEMV") of the fused small-batch path: its work decomposition, shared
// by the host planner, the CUDA kernel (gemv_kernel.cuh) and the host tests. Plain C++.
//
// y[t][n] = sum_k x[t][k] * w[n][k] for t < tokens <= 8 runs on m16n8k16 tensor-core MMAs with
// the weight as the A operand (16 rows) and the tokens as the B operand (8 columns; columns past
// `tokens` are zero), so the arithmetic is free next to the weight stream, for 1 token as for 8.
//
// Decomposition:
//   step : 32 consecutive k. Lane (g, c) of a warp (g = lane / 4, c = lane % 4) holds 8 k
//          (32 s + 8 c ..) of the tile's rows g and g + 8 and of token g's input as 16-bit
//          words; the two halves of those 8 k feed two MMAs (GemvFragA / GemvFragB below).
//   unit : the steps one 16-byte weight load per lane and row covers (GemvWeightFormat): 1 step
//          of dense 16-bit weights, 2 of fp8, 4 of 4-bit. A unit is 1 KB of a tile's packed
//          weights in every format, so counting units is counting the bytes a part streams.
//   tile : 16 output rows; GemvRow maps a tile's 16 slots onto weight rows.
//   part : 1 / parts of the K steps; an item is one (tile, part): items = tiles * parts.
//   CTA  : kGemvWarps warps, persistent: CTA b takes items b, b + grid, b + 2 grid, ...
//   warp : a contiguous run of its item's units (GemvWarpSteps).
// The warps' partial 16x8 results are summed through shared memory in warp order; with parts > 1
// each CTA leaves its sum in a workspace slot and the last CTA of the tile (a ticket) adds the
// slots in part order. Every output is summed in the same order on every run.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/common/host_device.h"
#include "kernels/decode/fast_divmod.h"

namespace pkv::gpu {

inline constexpr int32_t kGemvWarps = 8;      // warps per CTA
inline constexpr int32_t kGemvTileRows = 16;  // output rows per tile (the MMA's M)
inline constexpr int32_t kGemvMaxTokens = 8;  // the MMA's N
inline constexpr int32_t kGemvStepK = 32;     // k per warp step
inline constexpr int32_t kGemvMaxParts = 4;   // split-K factor limit
inline constexpr int32_t kGemvTileOutputs = kGemvTileRows * kGemvMaxTokens;  // 128 floats

// Weight row of slot `slot` (0..15) of tile `tile`. Slots 0..7 and 8..15 are two runs of 8 rows
// half a group apart, so the pairs an epilogue combines meet in one CTA:
//   group_rows = 16    : tile t covers rows 16 t .. 16 t + 15 (contiguous);
//   group_rows = D     : the q/k/v projection, head t / (D / 16), RoPE pairs (i, i + D / 2);
//   group_rows = 2 I   : the fused gate/up projection, gate row j with up row I + j.
// REQUIRES: group_rows % 16 == 0.
PKV_HOST_DEVICE int32_t GemvRow(int32_t group_rows, int32_t tile, int32_t slot) {
  const int32_t tiles_per_group = group_rows / kGemvTileRows;
  const int32_t group = tile / tiles_per_group;
  const int32_t first = (tile - group * tiles_per_group) * 8;
  return group * group_rows + first + (slot & 7) + (slot >> 3) * (group_rows / 2);
}

struct GemvStepRange {
  int32_t begin = 0;
  int32_t end = 0;  // exclusive
};

// The K units (steps for dense weights) warp `warp` of a CTA handles for part `part` of `parts`:
// the part's units split into kGemvWarps contiguous runs (some empty when the part has fewer
// units than warps).
PKV_HOST_DEVICE GemvStepRange GemvWarpSteps(int32_t steps, int32_t parts, int32_t part,
                                            int32_t warp) {
  const int64_t lo = int64_t{part} * steps / parts, hi = int64_t{part + 1} * steps / parts;
  const int64_t len = hi - lo;
  return {static_cast<int32_t>(lo + warp * len / kGemvWarps),
          static_cast<int32_t>(lo + (warp + 1) * len / kGemvWarps)};
}

// MMA operands from the lane's loads. wa / wb: the 4 32-bit words of the 16 bytes the lane (g, c)
// loaded from rows g and g + 8 at k = 32 s + 8 c; xv: token g's 16 bytes at the same k. MMA h
// (0 or 1) of the step uses words 2h and 2h + 1 (k 32 s + 8 c + 4 h .. + 3).
// PTX m16n8k16 (.row.col, 16-bit inputs), lane (g, c):
//   A: a0 = (row g, k 2c..2c+1), a1 = (g + 8, 2c..), a2 = (g, 2c+8..2c+9), a3 = (g + 8, 2c+8..)
//   B: b0 = (k 2c..2c+1, column g), b1 = (k 2c+8..2c+9, column g)
// Each lane holds the same four logical k in A and B, so mapping logical k {2c, 2c+1, 2c+8,
// 2c+9} of MMA h onto physical k 32 s + 8 c + 4 h + {0, 1, 2, 3} is one bijection for both
// operands, and the MMA sums exactly the products of those 16 physical k.
PKV_HOST_DEVICE void GemvFragA(const uint32_t (&wa)[4], const uint32_t (&wb)[4], int h,
                               uint32_t (&a)[4]) {
  a[0] = wa[2 * h];
  a[1] = wb[2 * h];
  a[2] = wa[2 * h + 1];
  a[3] = wb[2 * h + 1];
}
PKV_HOST_DEVICE void GemvFragB(const uint32_t (&xv)[4], int h, uint32_t (&b)[2]) {
  b[0] = xv[2 * h];
  b[1] = xv[2 * h + 1];
}
// Where the accumulator of (slot, token) lives: C fragment c0 = (row g, column 2c),
// c1 = (g, 2c + 1), c2 = (g + 8, 2c), c3 = (g + 8, 2c + 1).
PKV_HOST_DEVICE int32_t GemvAccLane(int32_t slot, int32_t token) {
  return (slot & 7) * 4 + (token >> 1);
}
PKV_HOST_DEVICE int32_t GemvAccElem(int32_t slot, int32_t token) {
  return (slot >> 3) * 2 + (token & 1);
}

// How the weights are stored (the packed layouts: gemv_quant.h). The kernel dequantizes in
// registers to the activation dtype and feeds the same MMAs.
//   kDense  [n][k] fp16/bf16 (the activation dtype).
//   kInt4   4-bit, asymmetric, groups of a multiple of 128 k: k / 2 bytes per row plus one 4-byte
//           (scale, zero) word per 128 k.
//   kFp8    e4m3, k bytes per row; the per-row (or per-tensor) float scale multiplies the fp32
//           sum in the epilogue.
enum class GemvWeightFormat : int32_t { kDense = 0, kInt4 = 1, kFp8 = 2 };

PKV_HOST_DEVICE constexpr int32_t GemvUnitSteps(GemvWeightFormat f) {
  return f == GemvWeightFormat::kInt4 ? 4 : f == GemvWeightFormat::kFp8 ? 2 : 1;
}
// k must be a multiple of this: whole units, and for 4-bit whole 128-k scale words.
PKV_HOST_DEVICE constexpr int32_t GemvKMultiple(GemvWeightFormat f) {
  return f == GemvWeightFormat::kInt4 ? 128 : kGemvStepK * GemvUnitSteps(f);
}
// Bytes one weight row streams: packed weights plus the scale words stored with them (the fp8
// per-row float scale is read once per tile in the epilogue, counted here too).
PKV_HOST_DEVICE constexpr int64_t GemvRowBytes(GemvWeightFormat f, int64_t k) {
  return f == GemvWeightFormat::kInt4  ? k / 2 + 4 * (k / 128)
         : f == GemvWeightFormat::kFp8 ? k + 4
                                       : 2 * k;
}

// The device as the planner sees it (queried once by the caller: the planner is pure).
struct GemvDevice {
  int32_t num_sms = 0;
  int32_t ctas_per_sm = 0;  // resident GEMV CTAs per SM (occupancy of the kernels)
  // Dynamic shared memory a CTA may take for its staged activations (GemvStageBytes) without
  // lowering ctas_per_sm; 0: never stage. Above 48 KB the launch needs the opt-in attribute
  // that QueryGemvDevice sets on the kernels of its (dtype, format) on the current device.
  int32_t x_stage_max_bytes = 0;
};

struct GemvPlan {
  int32_t n = 0;  // output rows
  int32_t k = 0;  // input length, a multiple of kGemvStepK
  int32_t group_rows = 16;
  GemvWeightFormat format = GemvWeightFormat::kDense;
  int32_t units = 0;              // K units per row: k / (32 * GemvUnitSteps(format))
  int32_t tiles = 0;              // ceil(n / 16)
  int32_t parts = 1;              // split-K factor
  int32_t items = 0;              // tiles * parts
  int32_t grid = 0;               // CTAs: min(items, num_sms * ctas_per_sm)
  int32_t x_stage_max_bytes = 0;  // GemvDevice::x_stage_max_bytes
  int32_t num_sms = 0;            // GemvDevice::num_sms (the bulk kernel's grid, gemv_bulk.cuh)
  // Deep batches (ChooseGemvDeepBatch): a warp keeps kGemvDeepBatchUnits units of loads in
  // flight instead of 4, in the kernels a launch of this plan can use them in (gemv_kernel.cuh).
  bool deep = false;
  // group_rows / 16 (tiles per row group) as a multiply-shift divisor: the kernel maps an item's
  // tile to its rows (GemvRow) without an integer divide per item (~20 instructions each).
  decode::FastDivmod group_tiles;
  // Workspace of a split launch: one 16x8 float slot per item and one ticket per tile.
  int64_t partial_floats() const { return parts > 1 ? int64_t{items} * kGemvTileOutputs : 0; }
  int32_t num_tickets() const { return parts > 1 ? tiles : 0; }
  // Weight bytes one launch streams (rows of masked tile slots are not counted).
  int64_t weight_bytes() const { return int64_t{n} * GemvRowBytes(format, k); }
};

// GemvRow(p.group_rows, tile, slot) by the plan's divisor: the kernel's form, no integer divide.
PKV_HOST_DEVICE int32_t GemvPlanRow(const GemvPlan& p, int32_t tile, int32_t slot) {
  const int32_t group = static_cast<int32_t>(p.group_tiles.Div(static_cast<uint32_t>(tile)));
  const int32_t first = (tile - group * static_cast<int32_t>(p.group_tiles.divisor)) * 8;
  return group * p.group_rows + first + (slot & 7) + (slot >> 3) * (p.group_rows / 2);
}

// x staging. A launch whose GemvStageBytes fit plan.x_stage_max_bytes first copies the k span
// of x its CTA's items read into shared memory (after the dependency wait; kRmsNorm: the
// normalized, dtype-rounded words), so the K loop's activation operands are shared-memory reads
// instead of one L2 round trip per step (bench/NOTES.md: "x staging"). The span is one part's k
// when every item of a CTA has the same part (parts == 1, or grid a multiple of parts: CTA b
// only takes items = b mod grid, whose part is b mod parts), else all of k.
struct GemvKSpan {
  int32_t begin = 0;  // first k
  int32_t len = 0;    // k count, a multiple of kGemvStepK
};
PKV_HOST_DEVICE bool GemvStagePartFixed(const GemvPlan& p) {
  return p.parts == 1 || p.grid % p.parts == 0;
}
PKV_HOST_DEVICE GemvKSpan GemvStageSpan(const GemvPlan& p, int32_t cta) {
  if (!GemvStagePartFixed(p)) return {0, p.k};
  const int32_t unit_k = kGemvStepK * GemvUnitSteps(p.format), part = cta % p.parts;
  const int64_t lo = int64_t{part} * p.units / p.parts, hi = int64_t{part + 1} * p.units / p.parts;
  return {static_cast<int32_t>(lo * unit_k), static_cast<int32_t>((hi - lo) * unit_k)};
}
// 16-byte vectors per staged token row of `len` k: len / 8, padded to 4 mod 8 so a quarter
// warp's 16-byte reads (tokens g, g + 1 at the same k, 64 bytes each) fall in distinct banks.
PKV_HOST_DEVICE int32_t GemvStageRowVecs(int32_t len) {
  const int32_t v = len / 8;
  return v + ((12 - v % 8) % 8);
}
// Shared-memory bytes of x staged per CTA for `tokens` tokens (the widest span of the plan).
PKV_HOST_DEVICE int64_t GemvStageBytes(const GemvPlan& p, int32_t tokens) {
  const int32_t unit_k = kGemvStepK * GemvUnitSteps(p.format);
  const int32_t widest = GemvStagePartFixed(p) ? (p.units + p.parts - 1) / p.parts * unit_k : p.k;
  return int64_t{tokens} * GemvStageRowVecs(widest) * 16;
}

// Whether staging x pays (given that GemvStageBytes fit the budget), from the H200 (132 SMs, 3
// CTAs per SM; the 4-bit kernels run 2 since w4reg, measured under this rule unchanged) chain
// timings of bench/results/2026-12-02-h200-w4gemv (staged vs per-step x, 8B and 1B shapes, every
// format, 1..8 tokens). Staging costs one serialized round trip after the dependency wait and
// tokens x span x 2 bytes per CTA through L2 (and, when large, the L1 the SM keeps for weight loads
// in flight); it saves each step's x words: for a normalized input (kRmsNorm) 4 loads and 8
// multiplies a step, for a plain one a 16-byte load L1 mostly serves. Rule:
//   normalized input: stage at <= 2 tokens (8B qkv int4 11.2 -> 9.2 us at T = 1, 11.7 -> 10.5
//     at T = 2); above, only where CTAs take several items (items > grid), there for 4-bit
//     weights at any size that fits (8B gate/up int4 T = 8: 58.9 -> 45.1 us: 4 steps per KB of
//     weights, each normalizing its x) and for 16-bit / fp8 weights up to kGemvStageMidBytes
//     (8B gate/up T = 4, 32 KB: dense 70.5 -> 67.4, fp8 56.1 -> 46.9; T = 8, 64.5 KB: dense
//     76.3 -> 92.4, a loss); one-item cells at T >= 4 lose (8B qkv int4 T = 8: 15.3 -> 19.4);
//   plain input: only 4-bit weights at one token (8B down 27.8 -> 21.8 us, gate/up 29.4 -> 28.2,
//     o 13.0 -> 12.5; dense and fp8 plain lost 1-19% at every token count).
// Worked examples: 8B qkv rmsnorm T = 2 -> stage, T = 4 -> no (one item a CTA); 8B gate/up
// rmsnorm T = 8: int4 -> stage, dense (64.5 KB) -> no; 8B down int4 plain T = 1 -> stage.
inline constexpr int64_t kGemvStageMidBytes = 36 << 10;
PKV_HOST_DEVICE bool ChooseGemvStageX(const GemvPlan& p, int32_t tokens, bool normalized_input) {
  if (!normalized_input) return p.format == GemvWeightFormat::kInt4 && tokens == 1;
  if (tokens <= 2) return true;
  if (p.items <= p.grid) return false;
  return p.format == GemvWeightFormat::kInt4 || GemvStageBytes(p, tokens) <= kGemvStageMidBytes;
}

// Deep batches. A warp issues the loads of a batch of units together and computes them when they
// have landed, so an SM keeps (CTAs on it) x 8 warps x batch x 1 KB in flight. With 3 CTAs an SM
// (the dense / fp8 occupancy) a batch of 4 units keeps 96 KB in flight, but a plan of at most
// 2 x num_sms items leaves at most 2 CTAs on an SM (8B o and down: 256 tiles on 132 SMs): 64 KB,
// and ncu measured those at 2.8-3.6 TB/s where 3-CTA launches stream at 3.8 (final9). Such plans
// run kernels with batches of kGemvDeepBatchUnits (2 CTAs an SM: 128 registers hold the 16
// loads), 128 KB in flight an SM. 4-bit weights keep their own pipeline (kRefillHalves).
// Measured (results/2026-12-03-h200-deep): 8B fp8 weights B=1 -4.8%, fused B=8 -3.8%, bf16 B=1
// only -0.8% (its o/down at one token are not bound by bytes in flight), nothing slower.
inline constexpr int32_t kGemvBatchUnits = 4;
inline constexpr int32_t kGemvDeepBatchUnits = 8;
PKV_HOST_DEVICE bool ChooseGemvDeepBatch(GemvWeightFormat format, int32_t items, int32_t num_sms) {
  return format != GemvWeightFormat::kInt4 && items <= 2 * num_sms;
}

// The split-K factor for `tiles` tiles of `units` K units (1 KB of packed weights each, so the
// rule sees a 4-bit row as the quarter of a 16-bit one it is) on `num_sms` SMs. Rule: one part
// when there are at least as many tiles as SMs (every SM streams a whole tile; measured on the
// H200, chain timing, T = 1 and 8: 8B o 2 -> 1 part dense 15.8 -> 12.1 us, int4 12.5 -> 8.3,
// fp8 13.3 -> 8.9; 8B down dense 39.3 -> 36.8, int4 T = 8 29.1 -> 23.7; the tickets, partial
// slots and a second round of items cost more than the split gains). Fewer tiles than SMs: the
// smallest parts in 1..4 with (a) at least two items per SM, so two CTAs stream on every SM, and
// (b) the fullest SM holding at most 1 / 0.9 of the mean (items / (num_sms * ceil(items /
// num_sms)) >= 0.9); a part keeps >= 2 units (2 KB) per warp (parts <= units / 16) so the split
// does not turn the stream into ticket traffic. When no factor meets (a) and (b), the best
// balance wins, smaller factors on ties. Worked examples on 132 SMs (H200):
//   8B o_proj   (256 tiles >= 132)            -> 1 (every format)
//   8B qkv      (384 tiles)                   -> 1
//   8B gate/up  (1792 tiles)                  -> 1
//   8B down     (256 tiles)                   -> 1
//   1B o_proj   (128 tiles, 64 steps):  2 parts = 256 < 264; 3 parts = 384, balance 0.97 -> 3
//   1B down     (128 tiles, 256 steps)        -> 3 (1 part measured slower: 12.8 -> 13.5 us)
//   tiny model  (8 tiles, 2 steps): parts <= 2 / 16 -> 1
//   1B o_proj 4-bit (128 tiles, 16 units): parts <= 16 / 16 -> 1 (2 MB in all: launch-bound)
int32_t ChooseGemvParts(int32_t tiles, int32_t units, int32_t num_sms);

// The plan of one projection. INVALID_ARGUMENT when k is not a positive multiple of
// GemvKMultiple(format) (32 dense, 64 fp8, 128 4-bit), n is not positive, group_rows is not a
// multiple of 16, or a paired group_rows (> 16) does not divide n.
absl::StatusOr<GemvPlan> PlanGemv(int32_t n, int32_t k, int32_t group_rows, const GemvDevice& d,
                                  GemvWeightFormat format = GemvWeightFormat::kDense);

}  // namespace pkv::gpu
