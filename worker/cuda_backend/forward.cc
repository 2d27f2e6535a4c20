// The forward pass and sampling as a sequence of launches on the backend's stream. Used as is for
// eager steps and under stream capture for CUDA graphs, so it only enqueues: no allocation, no
// synchronisation, no host reads of device data.
#include <cstdint>

#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"
#include "kernels/model/sampling.h"
#include "kernels/prefill/prefill_launch.h"
#include "worker/cuda_backend/backend_impl.h"

namespace pkv {
absl::Status CudaModelBackend::Impl::EnqueueQkvRope(int layer, const DeviceStep& s) {
  const ModelConfig& c = config;
  const cuda_backend::LayerWeights& w = weights.layers[layer];
  gpu::QkvRopeArgs r;
  r.dtype = weights.dtype;
  r.qkv = buffers.qkv();
  r.bias = w.qkv_bias;
  r.q_norm = w.q_norm;
  r.k_norm = w.k_norm;
  r.eps = c.rms_norm_eps;
  r.positions = s.positions;
  r.kv_slots = s.kv_slots;
  r.inv_freq = kv->rope_inv_freq();
  r.num_tokens = s.tokens;
  r.num_q_heads = c.num_q_heads;
  r.num_kv_heads = c.num_kv_heads;
  r.head_dim = c.head_dim;
  r.page_size = options.page_size;
  r.q_out = buffers.q();
  r.k_cache = kv->k_cache(layer);
  r.v_cache = kv->v_cache(layer);
  r.pdl = UsePdl();
  return gpu::LaunchQkvRopeKvWrite(r, stream());
}

absl::Status CudaModelBackend::Impl::EnqueueForward(const DeviceStep& s) {
  const ModelConfig& c = config;
  const bool fused = UseFused(s);
  gpu::EmbedNormArgs e;
  e.dtype = weights.dtype;
  e.embed = weights.embed;
  e.token_ids = s.token_ids;
  e.num_tokens = s.tokens;
  e.hidden = c.hidden_size;
  e.norm_weight = weights.layers[0].input_norm;
  e.eps = c.rms_norm_eps;
  e.x = buffers.x();
  e.xn = buffers.xn();
  // The fused q/k/v GEMV of layer 0 norms x itself from the embedding's sums of squares.
  e.sum_sq = fused ? static_cast<float*>(sum_sq_mlp.get()) : nullptr;
  // Tensor parallel: a vocabulary-parallel embedding, all-reduced (tp_hooks.h).
  PKV_RETURN_IF_ERROR(tp != nullptr ? tp->EnqueueEmbed(*this, s)
                                    : gpu::LaunchEmbedRmsNorm(e, stream()));
  for (int l = 0; l < c.num_layers; ++l) {
    PKV_RETURN_IF_ERROR(fused ? EnqueueFusedLayer(l, s) : EnqueueLayer(l, s));
  }
  if (fused) return EnqueueFusedHead(s);
  if (s.logit_rows == 0) return absl::OkStatus();
  PKV_RETURN_IF_ERROR(gemm->Linear(weights.dtype, buffers.final_xn(), s.logit_rows, c.hidden_size,
                                   weights.lm_head, c.vocab_size, buffers.logits(), true,
                                   stream()));
  return tp != nullptr ? tp->EnqueueLogits(*this, s) : absl::OkStatus();
}

// One layer on cuBLAS and the unfused kernels; its closing add + norm feeds the next layer (the
// last layer's: the final norm of the sampled tokens).
absl::Status CudaModelBackend::Impl::EnqueueLayer(int l, const DeviceStep& s) {
  const ModelConfig& c = config;
  const gpu::DType dt = weights.dtype;
  const int64_t t = s.tokens, h = c.hidden_size, d = c.head_dim;
  const int64_t qkv_dim = int64_t{c.num_q_heads + 2 * c.num_kv_heads} * d;
  const int64_t q_dim = int64_t{c.num_q_heads} * d, inter = c.intermediate_size;
  const bool pdl = UsePdl();
  const cuda_backend::LayerWeights& w = weights.layers[l];
  PKV_RETURN_IF_ERROR(
      gemm->Linear(dt, buffers.xn(), t, h, w.qkv, qkv_dim, buffers.qkv(), true, stream()));
  PKV_RETURN_IF_ERROR(EnqueueQkvRope(l, s));
  PKV_RETURN_IF_ERROR(kv->EnqueueAttention(l, s, buffers.q(), buffers.attn(), stream()));
  PKV_RETURN_IF_ERROR(
      gemm->Linear(dt, buffers.attn(), t, q_dim, w.o, h, buffers.delta(), false, stream()));
  // Tensor parallel: o_proj is row-parallel; sum the ranks' partials before the residual add.
  if (tp != nullptr) PKV_RETURN_IF_ERROR(tp->AllReduce(*this, buffers.delta(), t * h));

  gpu::AddNormArgs n;
  n.dtype = dt;
  n.x = buffers.x();
  n.delta = buffers.delta();
  n.bias = w.o_bias;
  n.num_out = s.tokens;
  n.hidden = c.hidden_size;
  n.norm_weight = w.post_norm;
  n.eps = c.rms_norm_eps;
  n.xn = buffers.xn();
  n.pdl = pdl;
  PKV_RETURN_IF_ERROR(gpu::LaunchAddRmsNorm(n, stream()));
  PKV_RETURN_IF_ERROR(gemm->Linear(dt, buffers.xn(), t, h, w.gate_up, 2 * inter, buffers.gate_up(),
                                   false, stream()));
  PKV_RETURN_IF_ERROR(gpu::LaunchSiluMul(dt, buffers.gate_up(), t, c.intermediate_size,
                                         buffers.act(), stream(), pdl));
  PKV_RETURN_IF_ERROR(
      gemm->Linear(dt, buffers.act(), t, inter, w.down, h, buffers.delta(), false, stream()));
  if (tp != nullptr)
    PKV_RETURN_IF_ERROR(tp->AllReduce(*this, buffers.delta(), t * h));  // row-parallel

  n.bias = nullptr;
  if (l + 1 < c.num_layers) {
    n.norm_weight = weights.layers[l + 1].input_norm;
  } else {  // the final norm, for the sampled tokens only
    n.norm_weight = weights.final_norm;
    n.rows = s.sample_token;
    n.num_out = s.logit_rows;
    n.write_x = false;
    n.xn = buffers.final_xn();
  }
  return gpu::LaunchAddRmsNorm(n, stream());
}

absl::Status CudaModelBackend::Impl::EnqueueSample(const DeviceStep& s) {
  gpu::SampleArgs a;
  a.logits = buffers.logits();
  a.vocab = config.vocab_size;
  if (tp != nullptr) {  // tensor parallel: the gathered logits, sampled on one rank only
    if (tp->sample_logits() == nullptr) return absl::OkStatus();
    a.logits = tp->sample_logits();
    a.vocab = tp->full_vocab();
  }
  a.params = s.sample_params;
  a.num_rows = s.header + 2;
  a.max_rows = s.logit_rows;
  a.results = buffers.results();
  a.top = buffers.top();
  return gpu::LaunchSample(a, stream());
}

}  // namespace pkv
