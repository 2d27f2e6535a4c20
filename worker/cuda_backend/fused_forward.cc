// The fused small-batch path of the forward pass (fused_plan.h) and its set-up. Like forward.cc
// it only enqueues (eager steps and CUDA-graph capture alike): no allocation, no
// synchronisation, no host reads of device data.
#include <cstdint>
#include <memory>

#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/model/gemv.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/backend_impl.h"

namespace pkv {
using cuda_backend::DeviceBuffer;

// Never fails the load: without the fused path or PDL the backend runs its cuBLAS path.
absl::Status CudaModelBackend::Impl::SetUpFused() {
  absl::StatusOr<bool> pdl = gpu::PdlUsable(device());
  absl::StatusOr<gpu::GemvDevice> gemv_device = gpu::QueryGemvDevice(device(), weights.dtype);
  if (!pdl.ok() || !gemv_device.ok()) {
    cudaGetLastError();  // a failed query must not surface at the next launch check
    PKV_LOG(WARNING) << "cuda backend: fused path / PDL unavailable: "
                     << (pdl.ok() ? gemv_device.status() : pdl.status()).message();
    return absl::OkStatus();
  }
  pdl_usable = *pdl;
  absl::StatusOr<cuda_backend::FusedPlans> plans =
      cuda_backend::PlanFusedLayers(config, *gemv_device);
  if (!plans.ok()) {
    PKV_LOG(INFO) << "cuda backend: fused small-batch path unavailable: "
                  << plans.status().message();
    return absl::OkStatus();
  }
  fused_plans = std::make_unique<cuda_backend::FusedPlans>(*std::move(plans));
  const int64_t parts_bytes = int64_t{fused_plans->residual_parts} * gpu::kGemvMaxTokens * 4;
  PKV_ASSIGN_OR_RETURN(gemv_partials,
                       DeviceBuffer::AllocateZeroed(fused_plans->partial_floats() * 4, stream()));
  // Tickets must start at zero; every launch leaves them at zero.
  PKV_ASSIGN_OR_RETURN(gemv_tickets, DeviceBuffer::AllocateZeroed(
                                         int64_t{fused_plans->num_tickets()} * 4, stream()));
  PKV_ASSIGN_OR_RETURN(sum_sq_attn, DeviceBuffer::AllocateZeroed(parts_bytes, stream()));
  PKV_ASSIGN_OR_RETURN(sum_sq_mlp, DeviceBuffer::AllocateZeroed(parts_bytes, stream()));
  PKV_LOG(INFO) << "cuda backend: fused small-batch path available (" << gemv_device->num_sms
                << " SMs x " << gemv_device->ctas_per_sm << " GEMV CTAs; split-K qkv "
                << fused_plans->qkv.parts << ", o " << fused_plans->o.parts << ", gate/up "
                << fused_plans->gate_up.parts << ", down " << fused_plans->down.parts
                << "), programmatic dependent launch " << (pdl_usable ? "usable" : "unavailable");
  if (options.fused_max_hidden > 0 && config.hidden_size > options.fused_max_hidden &&
      options.fused_small_batch) {
    options.fused_small_batch = false;
    PKV_LOG(INFO) << "cuda backend: fused small-batch path off by default: hidden size "
                  << config.hidden_size << " > fused_max_hidden " << options.fused_max_hidden
                  << " (cuBLAS is faster there)";
  }
  return absl::OkStatus();
}

bool CudaModelBackend::Impl::UseFused(const DeviceStep& s) const {
  return fused_plans != nullptr && options.fused_small_batch && s.tokens >= 1 &&
         s.tokens <= options.fused_max_tokens;
}

uint64_t CudaModelBackend::Impl::FusedSignature(const DeviceStep& s) const {
  uint64_t sig = 0;
  if (UseFused(s)) sig ^= 0xC2B2AE3D27D4EB4Full;
  if (UsePdl()) sig ^= 0x165667B19E3779F9ull + static_cast<uint64_t>(options.fused_prefetch_steps);
  if (gemm->tuned()) sig ^= 0x27D4EB2F165667C5ull;
  return sig;
}

namespace {

// The parts of GemvArgs every fused projection shares.
gpu::GemvArgs GemvBase(const CudaModelBackend::Impl& m, const gpu::GemvPlan& plan, const void* w,
                       int32_t tokens) {
  gpu::GemvArgs a;
  a.dtype = m.weights.dtype;
  a.plan = plan;
  a.tokens = tokens;
  a.w = w;
  a.eps = m.config.rms_norm_eps;
  a.partials = static_cast<float*>(m.gemv_partials.get());
  a.tickets = static_cast<int32_t*>(m.gemv_tickets.get());
  a.pdl = m.UsePdl();
  a.prefetch_steps = a.pdl ? m.options.fused_prefetch_steps : 0;
  return a;
}

}  // namespace

absl::Status CudaModelBackend::Impl::EnqueueFusedLayer(int l, const DeviceStep& s) {
  const ModelConfig& c = config;
  const cuda_backend::FusedPlans& p = *fused_plans;
  const cuda_backend::LayerWeights& w = weights.layers[l];
  const bool last = l + 1 == c.num_layers;
  float* res = buffers.x();
  float* ss_attn = static_cast<float*>(sum_sq_attn.get());
  float* ss_mlp = static_cast<float*>(sum_sq_mlp.get());

  gpu::GemvArgs a = GemvBase(*this, p.qkv, w.qkv, s.tokens);
  a.input = gpu::GemvInput::kRmsNorm;
  a.x = res;
  a.norm_weight = w.input_norm;
  a.sum_sq_parts = ss_mlp;
  a.num_sum_sq_parts = l == 0 ? 1 : p.residual_parts;  // layer 0: the embedding's one part
  if (p.rope_in_gemv) {
    a.epilogue = gpu::GemvEpilogue::kRopeKv;
    a.bias = w.qkv_bias;
    a.positions = s.positions;
    a.kv_slots = s.kv_slots;
    a.inv_freq = kv->rope_inv_freq();
    a.num_q_heads = c.num_q_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = c.head_dim;
    a.page_size = options.page_size;
    a.q_out = buffers.q();
    a.k_cache = kv->k_cache(l);
    a.v_cache = kv->v_cache(l);
    PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, stream()));
  } else {  // q/k norm needs whole heads: fp32 q/k/v, then the unfused RoPE kernel
    a.epilogue = gpu::GemvEpilogue::kStore;
    a.y = buffers.qkv();
    a.y_f32 = true;
    PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, stream()));
    PKV_RETURN_IF_ERROR(EnqueueQkvRope(l, s));
  }
  PKV_RETURN_IF_ERROR(kv->EnqueueAttention(l, s, buffers.q(), buffers.attn(), stream()));

  a = GemvBase(*this, p.o, w.o, s.tokens);  // x += o(attn) (+ bias)
  a.x = buffers.attn();
  a.epilogue = gpu::GemvEpilogue::kResidual;
  a.residual = res;
  a.bias = w.o_bias;
  a.sum_sq_out = ss_attn;
  PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, stream()));

  a = GemvBase(*this, p.gate_up, w.gate_up, s.tokens);  // act = silu(gate) * up of RMSNorm(x)
  a.input = gpu::GemvInput::kRmsNorm;
  a.x = res;
  a.norm_weight = w.post_norm;
  a.sum_sq_parts = ss_attn;
  a.num_sum_sq_parts = p.residual_parts;
  a.epilogue = gpu::GemvEpilogue::kSiluMul;
  a.act = buffers.act();
  PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, stream()));

  a = GemvBase(*this, p.down, w.down, s.tokens);  // x += down(act); the last layer: delta
  a.x = buffers.act();
  if (last) {
    a.epilogue = gpu::GemvEpilogue::kStore;
    a.y = buffers.delta();
  } else {
    a.epilogue = gpu::GemvEpilogue::kResidual;
    a.residual = res;
    a.sum_sq_out = ss_mlp;
  }
  return gpu::LaunchGemv(a, stream());
}

// After the last fused layer: the final norm of the sampled tokens (x + the last down projection,
// as the unfused path) and the LM head.
absl::Status CudaModelBackend::Impl::EnqueueFusedHead(const DeviceStep& s) {
  gpu::AddNormArgs n;
  n.dtype = weights.dtype;
  n.x = buffers.x();
  n.delta = buffers.delta();
  n.rows = s.sample_token;
  n.num_out = s.logit_rows;
  n.hidden = config.hidden_size;
  n.norm_weight = weights.final_norm;
  n.eps = config.rms_norm_eps;
  n.write_x = false;
  n.xn = buffers.final_xn();
  n.pdl = UsePdl();
  PKV_RETURN_IF_ERROR(gpu::LaunchAddRmsNorm(n, stream()));
  if (s.logit_rows == 0) return absl::OkStatus();
  gpu::GemvArgs a = GemvBase(*this, fused_plans->lm_head, weights.lm_head, s.logit_rows);
  a.x = buffers.final_xn();
  a.y = buffers.logits();
  a.y_f32 = true;
  return gpu::LaunchGemv(a, stream());
}

}  // namespace pkv
