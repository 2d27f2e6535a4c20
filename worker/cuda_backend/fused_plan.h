// The fused small-batch path of the CUDA backend (kernels/model/gemv.h) for one model shape: which
// shapes it supports and how each projection spreads over the GPU. Pure host logic (the device
// limits are an input), unit-tested without a GPU.
//
// A layer at 1..8 tokens runs as
//   q/k/v GEMV   RMSNorm(x) input; RoPE, q out, K/V page write in the epilogue
//                (q/k-normed models, Qwen3: fp32 q/k/v out, then LaunchQkvRopeKvWrite)
//   attention    the decode engine (or the generic/prefill kernels), unchanged
//   o GEMV       x += o(attn) (+ bias); sums of squares of x per 16 rows
//   gate/up GEMV RMSNorm(x) input; act = silu(gate) * up in the epilogue
//   down GEMV    x += down(act); sums of squares for the next layer's q/k/v GEMV
// (last layer: down stores delta and the unfused gather norm runs, then the LM head GEMV).
// Thread-safety: plain values.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/model/gemv_plan.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

struct FusedPlans {
  gpu::GemvPlan qkv;  // (H_q + 2 H_kv) D rows over hidden; row group D, or 16 when !rope_in_gemv
  gpu::GemvPlan o;    // hidden rows over H_q D
  gpu::GemvPlan gate_up;       // 2 I rows over hidden, one row group (gate j pairs with up I + j)
  gpu::GemvPlan down;          // hidden rows over I
  gpu::GemvPlan lm_head;       // V rows over hidden
  bool rope_in_gemv = true;    // false for q/k-normed models (the norm needs the whole head)
  int32_t residual_parts = 0;  // hidden / 16: sum-of-squares parts the o / down epilogues leave

  // Workspace shared by every launch (they run one after another): the most any plan needs.
  int64_t partial_floats() const;
  int32_t num_tickets() const;
};

// How each fused projection's weights are stored (every layer alike; the LM head is always dense)
// and the device as each format's GEMV kernels see it (their occupancies differ).
struct FusedFormats {
  gpu::GemvWeightFormat qkv = gpu::GemvWeightFormat::kDense;
  gpu::GemvWeightFormat o = gpu::GemvWeightFormat::kDense;
  gpu::GemvWeightFormat gate_up = gpu::GemvWeightFormat::kDense;
  gpu::GemvWeightFormat down = gpu::GemvWeightFormat::kDense;
  gpu::GemvDevice dense, int4, fp8;  // only those of the formats used are read
  const gpu::GemvDevice& device(gpu::GemvWeightFormat f) const {
    return f == gpu::GemvWeightFormat::kInt4  ? int4
           : f == gpu::GemvWeightFormat::kFp8 ? fp8
                                              : dense;
  }
};

// INVALID_ARGUMENT naming the first unsupported dimension: hidden, H_q * D and the intermediate
// size must be multiples of 32 (whole K steps), and D a multiple of 16 (whole RoPE pair tiles);
// packed formats need more (PlanGemv: 128 for 4-bit, 64 for fp8).
absl::StatusOr<FusedPlans> PlanFusedLayers(const ModelConfig& c, const FusedFormats& formats);
// Every projection dense.
absl::StatusOr<FusedPlans> PlanFusedLayers(const ModelConfig& c, const gpu::GemvDevice& device);

}  // namespace pkv::cuda_backend
