#include "worker/cuda_backend/fused_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::cuda_backend {
namespace {

absl::Status NeedMultiple(const char* what, int64_t value, int64_t of) {
  if (value > 0 && value % of == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("fused small-batch path: ", what, " = ", value,
                                                 " is not a positive multiple of ", of));
}

}  // namespace

int64_t FusedPlans::partial_floats() const {
  return std::max({qkv.partial_floats(), o.partial_floats(), gate_up.partial_floats(),
                   down.partial_floats(), lm_head.partial_floats()});
}

int32_t FusedPlans::num_tickets() const {
  return std::max({qkv.num_tickets(), o.num_tickets(), gate_up.num_tickets(), down.num_tickets(),
                   lm_head.num_tickets()});
}

absl::StatusOr<FusedPlans> PlanFusedLayers(const ModelConfig& c, const gpu::GemvDevice& device) {
  FusedFormats dense;
  dense.dense = device;
  return PlanFusedLayers(c, dense);
}

absl::StatusOr<FusedPlans> PlanFusedLayers(const ModelConfig& c, const FusedFormats& f) {
  const int64_t q_dim = int64_t{c.num_q_heads} * c.head_dim;
  const int64_t qkv_rows = int64_t{c.num_q_heads + 2 * c.num_kv_heads} * c.head_dim;
  PKV_RETURN_IF_ERROR(NeedMultiple("hidden_size", c.hidden_size, gpu::kGemvStepK));
  PKV_RETURN_IF_ERROR(NeedMultiple("num_q_heads * head_dim", q_dim, gpu::kGemvStepK));
  PKV_RETURN_IF_ERROR(NeedMultiple("intermediate_size", c.intermediate_size, gpu::kGemvStepK));
  PKV_RETURN_IF_ERROR(NeedMultiple("head_dim", c.head_dim, gpu::kGemvTileRows));
  if (c.vocab_size <= 0 || 2 * int64_t{c.intermediate_size} > (int64_t{1} << 30) ||
      qkv_rows > (int64_t{1} << 30) || q_dim > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("fused small-batch path: dimensions out of range");
  }
  FusedPlans p;
  p.rope_in_gemv = !c.qk_norm;
  const int32_t h = c.hidden_size, inter = c.intermediate_size;
  PKV_ASSIGN_OR_RETURN(p.qkv, gpu::PlanGemv(static_cast<int32_t>(qkv_rows), h,
                                            p.rope_in_gemv ? c.head_dim : gpu::kGemvTileRows,
                                            f.device(f.qkv), f.qkv));
  PKV_ASSIGN_OR_RETURN(
      p.o, gpu::PlanGemv(h, static_cast<int32_t>(q_dim), gpu::kGemvTileRows, f.device(f.o), f.o));
  PKV_ASSIGN_OR_RETURN(p.gate_up,
                       gpu::PlanGemv(2 * inter, h, 2 * inter, f.device(f.gate_up), f.gate_up));
  PKV_ASSIGN_OR_RETURN(p.down,
                       gpu::PlanGemv(h, inter, gpu::kGemvTileRows, f.device(f.down), f.down));
  PKV_ASSIGN_OR_RETURN(p.lm_head, gpu::PlanGemv(c.vocab_size, h, gpu::kGemvTileRows, f.dense));
  p.residual_parts = h / gpu::kGemvTileRows;
  return p;
}

}  // namespace pkv::cuda_backend
