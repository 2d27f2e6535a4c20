// ForwardPass (forward.h): the fused small-batch path of every layer (fused_plan.h) and its head.
// Like forward.cc it only enqueues (eager steps and CUDA-graph capture alike): no allocation, no
// synchronisation, no host reads of device data.
#include <cstdint>

#include "common/status_macros.h"
#include "kernels/model/gemv.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/forward.h"

namespace pkv::cuda_backend {
namespace {

// The parts of GemvArgs every fused projection shares.
gpu::GemvArgs GemvBase(const ForwardParts& p, const ForwardFlags& f, const gpu::GemvPlan& plan,
                       const ProjectionWeights& w, int32_t tokens) {
  gpu::GemvArgs a;
  a.dtype = p.weights.dtype;
  a.plan = plan;
  a.tokens = tokens;
  a.w = w.w;
  a.w_scales = w.scales;
  a.w_scale_count = w.scale_count;
  a.eps = p.config.rms_norm_eps;
  a.partials = p.fused.partials();
  a.tickets = p.fused.tickets();
  a.pdl = f.pdl;
  a.prefetch_steps = a.pdl ? f.prefetch_steps : 0;
  return a;
}

}  // namespace

absl::Status ForwardPass::SetFusedInput(const DeviceStep& s, const float* norm_weight,
                                        const float* sum_sq_parts, int32_t num_sum_sq_parts,
                                        gpu::GemvArgs* a) const {
  if (!f_.prenorm) {  // the GEMV normalizes (per step, or once per CTA when it stages x)
    a->input = gpu::GemvInput::kRmsNorm;
    a->x = p_.buffers.x();
    a->norm_weight = norm_weight;
    a->sum_sq_parts = sum_sq_parts;
    a->num_sum_sq_parts = num_sum_sq_parts;
    return absl::OkStatus();
  }
  gpu::AddNormArgs n;  // x alone (no delta), normalized into xn: the GEMV's plain input
  n.dtype = p_.weights.dtype;
  n.x = p_.buffers.x();
  n.num_out = s.tokens;
  n.hidden = p_.config.hidden_size;
  n.norm_weight = norm_weight;
  n.eps = p_.config.rms_norm_eps;
  n.write_x = false;
  n.xn = p_.buffers.xn();
  n.pdl = f_.pdl;
  PKV_RETURN_IF_ERROR(gpu::LaunchAddRmsNorm(n, p_.stream));
  a->input = gpu::GemvInput::kPlain;
  a->x = p_.buffers.xn();
  return absl::OkStatus();
}

absl::Status ForwardPass::EnqueueFusedLayer(int l, const DeviceStep& s) const {
  const ModelConfig& c = p_.config;
  const StepBuffers& b = p_.buffers;
  const FusedPlans& p = p_.fused.plans();
  const LayerWeights& w = p_.weights.layers[l];
  const bool last = l + 1 == c.num_layers;
  float* res = b.x();
  float* ss_attn = p_.fused.sum_sq_attn();
  float* ss_mlp = p_.fused.sum_sq_mlp();

  gpu::GemvArgs a = GemvBase(p_, f_, p.qkv, w.qkv, s.tokens);
  a.bulk = (f_.gemv_bulk & kBulkQkv) != 0;
  // Layer 0's sums of squares: the embedding's one part.
  PKV_RETURN_IF_ERROR(SetFusedInput(s, w.input_norm, ss_mlp, l == 0 ? 1 : p.residual_parts, &a));
  // The GEMV's RoPE+KV epilogue writes 16-bit pages only: with FP8 pages q/k/v go out as fp32
  // and the RoPE+KV write kernel quantizes them (one more launch and a (H_q + 2 H_kv) D fp32
  // round trip per layer and token).
  if (p.rope_in_gemv && !IsFp8(p_.kv.kv_cache_dtype())) {
    a.epilogue = gpu::GemvEpilogue::kRopeKv;
    a.bias = w.qkv_bias;
    a.positions = s.positions;
    a.kv_slots = s.kv_slots;
    a.inv_freq = p_.kv.rope_inv_freq();
    a.num_q_heads = c.num_q_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = c.head_dim;
    a.page_size = p_.kv.page_size();
    a.q_out = b.q();
    a.k_cache = p_.kv.k_cache(l);
    a.v_cache = p_.kv.v_cache(l);
    PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, p_.stream));
  } else {  // q/k norm needs whole heads, or FP8 pages: fp32 q/k/v, then the RoPE kernel
    a.epilogue = gpu::GemvEpilogue::kStore;
    a.y = b.qkv();
    a.y_f32 = true;
    PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, p_.stream));
    PKV_RETURN_IF_ERROR(EnqueueQkvRope(l, s));
  }
  if (!f_.skip_attention) {
    PKV_RETURN_IF_ERROR(p_.kv.EnqueueAttention(l, s, b.q(), b.attn(), p_.stream, f_.pdl_attention));
  }

  a = GemvBase(p_, f_, p.o, w.o, s.tokens);  // x += o(attn) (+ bias)
  a.x = b.attn();
  a.epilogue = gpu::GemvEpilogue::kResidual;
  a.residual = res;
  a.bias = w.o_bias;
  a.sum_sq_out = ss_attn;
  a.bulk = (f_.gemv_bulk & kBulkO) != 0;
  PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, p_.stream));

  a = GemvBase(p_, f_, p.gate_up, w.gate_up, s.tokens);  // act = silu(gate) * up of RMSNorm(x)
  PKV_RETURN_IF_ERROR(SetFusedInput(s, w.post_norm, ss_attn, p.residual_parts, &a));
  a.epilogue = gpu::GemvEpilogue::kSiluMul;
  a.act = b.act();
  a.bulk = (f_.gemv_bulk & kBulkGateUp) != 0;
  PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, p_.stream));

  a = GemvBase(p_, f_, p.down, w.down, s.tokens);  // x += down(act); the last layer: delta
  a.x = b.act();
  a.bulk = (f_.gemv_bulk & kBulkDown) != 0;
  if (last) {
    a.epilogue = gpu::GemvEpilogue::kStore;
    a.y = b.delta();
  } else {
    a.epilogue = gpu::GemvEpilogue::kResidual;
    a.residual = res;
    a.sum_sq_out = ss_mlp;
  }
  return gpu::LaunchGemv(a, p_.stream);
}

// After the last fused layer: the final norm of the sampled tokens (x + the last down projection,
// as the unfused path) and the LM head.
absl::Status ForwardPass::EnqueueFusedHead(const DeviceStep& s) const {
  const StepBuffers& b = p_.buffers;
  gpu::AddNormArgs n;
  n.dtype = p_.weights.dtype;
  n.x = b.x();
  n.delta = b.delta();
  n.rows = s.sample_token;
  n.num_out = s.logit_rows;
  n.hidden = p_.config.hidden_size;
  n.norm_weight = p_.weights.final_norm;
  n.eps = p_.config.rms_norm_eps;
  n.write_x = false;
  n.xn = b.final_xn();
  n.pdl = f_.pdl;
  PKV_RETURN_IF_ERROR(gpu::LaunchAddRmsNorm(n, p_.stream));
  if (s.logit_rows == 0) return absl::OkStatus();
  ProjectionWeights head;  // dense (an FP8 checkpoint's lm_head is dequantized at load)
  head.w = p_.weights.lm_head;
  gpu::GemvArgs a = GemvBase(p_, f_, p_.fused.plans().lm_head, head, s.logit_rows);
  a.x = b.final_xn();
  a.y = b.logits();
  a.y_f32 = true;
  return gpu::LaunchGemv(a, p_.stream);
}

}  // namespace pkv::cuda_backend
