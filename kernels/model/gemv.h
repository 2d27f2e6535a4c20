// The fused few-token projection kernel (CUDA): y = x . w^T for 1..8 tokens with its neighbours
// folded in, so a decoder layer at small batch is five launches (q/k/v, attention, o, gate/up,
// down) instead of nine. Work decomposition and operand layout: gemv_plan.h.
//
// Inputs (GemvInput):
//   kPlain   x is [tokens][k] in the weight dtype (attention output, SiLU*mul output, final norm).
//   kRmsNorm x is the float32 residual stream [tokens][k]; the kernel feeds the MMA with
//            RMSNorm(x) * norm_weight rounded to the weight dtype, exactly as LaunchAddRmsNorm
//            would have written it. The per-token sum of squares comes from `sum_sq_parts`,
//            partial sums left by the kernel that last wrote x (the residual epilogue below, or
//            the embedding), added in a fixed order; no CTA re-reads the whole row for it.
// Epilogues (GemvEpilogue), on the fp32 sum of each (row, token):
//   kStore     y[t][n] in the weight dtype or float32 (LM head, Qwen3's q/k-normed q/k/v).
//   kResidual  residual[t][n] += round_to_dtype(y) + bias[n] (the o / down projection closing a
//              block, as LaunchAddRmsNorm adds delta), and sum_sq_out[tile][t] = the sum of the
//              new residual's squares over the tile's 16 rows, for the next kRmsNorm consumer.
//   kRopeKv    the q/k/v projection: bias, RoPE on q and k heads (rotate-half, angles in double as
//              LaunchQkvRopeKvWrite), q to q_out, k and v into the token's KV slot (slot < 0:
//              graph padding, no write). Rows are paired (group_rows = head_dim).
//   kSiluMul   the gate/up projection: act[t][j] = silu(g) * u of the dtype-rounded gate row j
//              and up row I + j (group_rows = 2 I), as LaunchSiluMul computes it.
// Weights (plan.format, gemv_plan.h): dense fp16/bf16, 4-bit groups or fp8 e4m3, packed on the
// host by gemv_quant.h and dequantized in registers to the activation dtype `dtype` before the
// same MMAs (FP8 weights of a bf16 model: to fp16, with x converted to fp16, the same products;
// gemv_kernel.cuh GemvMmaT), so every input mode, epilogue, split-K, PDL and prefetch work for all
// of them. The MMA operands are exact: 4-bit weights enter as q - z and the fp32 sum of each 128-k
// group is multiplied by its scale; fp8 weights as e4m3 values and the row's fp32 sum by its scale.
// So the GEMV differs from LaunchDequantizeGemvWeights' rounded weights (round(w * scale) per
// weight) by that rounding, a relative 2^-9 (fp16) or 2^-8 (bf16) per weight at most.
// Numerics: fp32 accumulation over k in a fixed order (warp split, then parts in order), so a
// step gives the same bits on every run; sums differ from cuBLAS's order by fp32 rounding only.
//
// x staging (`stage_x`, gemv_plan.h: GemvStageSpan, ChooseGemvStageX): when tokens x the CTA's
// k span fits the plan's shared-memory budget and the rule says it pays, each CTA copies (kRmsNorm:
// normalizes and rounds) its x span into shared memory once after the dependency wait, and the K
// loop reads it from there; same bits. QueryGemvDevice gives plans a staging budget unless built
// with -DPKV_GEMV_X_STAGE=OFF (CMake).
//
// Programmatic dependent launch (`pdl`, sm_90 code only, see PdlUsable): the kernel loads its
// first weights (and, with prefetch_steps > 0, prefetches more into L2) before waiting for the
// previous kernel, then lets the next kernel launch. Safe in CUDA graphs.
//
// The launcher takes an explicit stream, allocates nothing, never synchronises, checks the launch
// and returns INVALID_ARGUMENT naming an unsupported value. Thread-safety: pure function of args.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {

enum class GemvInput : int32_t { kPlain = 0, kRmsNorm = 1 };
enum class GemvEpilogue : int32_t { kStore = 0, kResidual = 1, kRopeKv = 2, kSiluMul = 3 };
enum class GemvStageX : int32_t { kAuto = 0, kAlways = 1, kNever = 2 };

struct GemvArgs {
  DType dtype = DType::kBFloat16;
  GemvPlan plan;            // PlanGemv(n, k, group_rows, device) for this projection
  int32_t tokens = 0;       // 1..kGemvMaxTokens
  const void* w = nullptr;  // [plan.n][plan.k] dtype, or packed (gemv_quant.h); 16-byte aligned
  const void* w_scales = nullptr;  // kInt4: uint32 [n][k / 128]; kFp8: float [w_scale_count]
  int32_t w_scale_count = 0;       // kFp8: n (per row) or 1 (per tensor)

  GemvInput input = GemvInput::kPlain;
  const void* x = nullptr;              // kPlain: [tokens][k] dtype; kRmsNorm: float [tokens][k]
  const float* norm_weight = nullptr;   // kRmsNorm: [k]
  const float* sum_sq_parts = nullptr;  // kRmsNorm: [num_sum_sq_parts][8]: sum over parts of
                                        // [p][t] is token t's sum of x^2 over all k
  int32_t num_sum_sq_parts = 0;
  float eps = 1e-5f;

  GemvEpilogue epilogue = GemvEpilogue::kStore;
  void* y = nullptr;  // kStore: [tokens][n] dtype, or float with y_f32
  bool y_f32 = false;
  float* residual = nullptr;    // kResidual: float [tokens][n], updated in place
  const float* bias = nullptr;  // kResidual: [n]; kRopeKv: [n] (q/k/v bias); or nullptr
  float* sum_sq_out = nullptr;  // kResidual: [plan.tiles][8]
  void* act = nullptr;          // kSiluMul: [tokens][n / 2] dtype

  // kRopeKv (see QkvRopeArgs): n = (num_q_heads + 2 num_kv_heads) * head_dim.
  const int32_t* positions = nullptr;  // [tokens]
  const int32_t* kv_slots = nullptr;   // [tokens]
  const double* inv_freq = nullptr;    // [head_dim / 2]
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // multiple of 16
  int32_t page_size = 0;
  void* q_out = nullptr;    // [tokens][H_q][D] dtype
  void* k_cache = nullptr;  // [num_pages][H_kv][page_size][D] dtype, this layer
  void* v_cache = nullptr;

  // Split-K workspace (plan.parts > 1): partials [plan.partial_floats()], tickets
  // [plan.num_tickets()] zeroed once; every launch leaves the tickets at zero again.
  float* partials = nullptr;
  int32_t* tickets = nullptr;

  bool pdl = false;  // launch with programmatic stream serialization
  // x staging: kAuto where ChooseGemvStageX says it pays, kAlways whenever GemvStageBytes fit
  // the plan's budget (gemv_plan.h), kNever: x read per step.
  GemvStageX stage_x = GemvStageX::kAuto;
  int32_t prefetch_steps = 0;  // K units per warp prefetched to L2 before the dependency wait
  // One-token launches of dense weights stream them through per-warp bulk-copy rings
  // (gemv_bulk.cuh; sm_90 code: ask only where PdlUsable) when the row is whole 2 KB chunks;
  // others run the register-batch kernel. Sums in another fp32 order than that kernel's.
  bool bulk = false;
};

// The shared-memory bytes of x a launch of `a` stages per CTA: GemvStageBytes when they fit the
// plan's budget and a.stage_x (kAuto: ChooseGemvStageX) says so, else 0.
inline int64_t GemvStagedXBytes(const GemvArgs& a) {
  if (a.stage_x == GemvStageX::kNever) return 0;
  const int64_t bytes = GemvStageBytes(a.plan, a.tokens);
  if (bytes > a.plan.x_stage_max_bytes) return 0;
  if (a.stage_x == GemvStageX::kAuto &&
      !ChooseGemvStageX(a.plan, a.tokens, a.input == GemvInput::kRmsNorm)) {
    return 0;
  }
  return bytes;
}

// Resident CTAs per SM of the GEMV kernels of (`dtype`, `format`) (the least of its
// instantiations) and the SM count of `device`, for PlanGemv.
absl::StatusOr<GemvDevice> QueryGemvDevice(int device, DType dtype, GemvWeightFormat format);

// Resident CTAs per SM of the GEMV kernels of `dtype` (the least of its instantiations) and the
// SM count of `device`, for PlanGemv.
absl::StatusOr<GemvDevice> QueryGemvDevice(int device, DType dtype);

// Whether launches with programmatic dependent launch are safe on `device`: compute capability
// >= 9.0 and the loaded kernels were compiled for it (not JIT-compiled from sm_80 PTX, which
// lacks the dependency wait).
absl::StatusOr<bool> PdlUsable(int device);

absl::Status LaunchGemv(const GemvArgs& a, cudaStream_t stream);

// Packed quantized weights (gemv_quant.h) -> dense [n][k] `dtype` in device memory: the
// prefill / large-batch path dequantizes one matrix into scratch for the dense GEMM. The values
// are bit-identical to DequantizeInt4ToDtype / DequantizeFp8ToDtype. Same launcher contract.
struct GemvDequantArgs {
  DType dtype = DType::kBFloat16;
  GemvWeightFormat format = GemvWeightFormat::kInt4;  // kInt4 or kFp8
  int64_t n = 0, k = 0;                               // k a multiple of GemvKMultiple(format)
  const void* w = nullptr;                            // packed weights, 16-byte aligned
  const void* w_scales = nullptr;                     // as GemvArgs
  int64_t w_scale_count = 0;                          // kFp8: n or 1
  void* out = nullptr;                                // [n][k] dtype, 16-byte aligned
};
absl::Status LaunchDequantizeGemvWeights(const GemvDequantArgs& a, cudaStream_t stream);

}  // namespace pkv::gpu
