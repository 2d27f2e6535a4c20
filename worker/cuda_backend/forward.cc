// ForwardPass (forward.h): the cuBLAS path of every layer, the embedding, the LM head and sampling.
#include "worker/cuda_backend/forward.h"

#include <cstdint>

#include "common/status_macros.h"
#include "kernels/model/gemv.h"
#include "kernels/model/model_kernels.h"
#include "kernels/model/sampling.h"

namespace pkv::cuda_backend {

absl::Status ForwardPass::EnqueueQkvRope(int layer, const DeviceStep& s) const {
  const ModelConfig& c = p_.config;
  const StepBuffers& b = p_.buffers;
  const LayerWeights& w = p_.weights.layers[layer];
  gpu::QkvRopeArgs r;
  r.dtype = p_.weights.dtype;
  r.qkv = b.qkv();
  r.bias = w.qkv_bias;
  r.q_norm = w.q_norm;
  r.k_norm = w.k_norm;
  r.eps = c.rms_norm_eps;
  r.positions = s.positions;
  r.kv_slots = s.kv_slots;
  r.inv_freq = p_.kv.rope_inv_freq();
  r.num_tokens = s.tokens;
  r.num_q_heads = c.num_q_heads;
  r.num_kv_heads = c.num_kv_heads;
  r.head_dim = c.head_dim;
  r.page_size = p_.kv.page_size();
  r.q_out = b.q();
  r.k_cache = p_.kv.k_cache(layer);
  r.v_cache = p_.kv.v_cache(layer);
  r.kv_dtype = p_.kv.kv_cache_dtype();
  r.kv_scales = p_.kv.kv_scales(layer);
  r.pdl = f_.pdl;
  return gpu::LaunchQkvRopeKvWrite(r, p_.stream);
}

absl::Status ForwardPass::Linear(const void* x, int64_t tokens, const ProjectionWeights& w, void* y,
                                 bool y_f32) const {
  if (w.packed()) {
    return p_.packed.Enqueue(p_.weights, x, tokens, w, y, y_f32, f_.pdl, p_.gemm, p_.stream);
  }
  return p_.gemm.Linear(p_.weights.dtype, x, tokens, w.k, w.w, w.n, y, y_f32, p_.stream);
}

absl::Status ForwardPass::EnqueueForward(const DeviceStep& s) const {
  const ModelConfig& c = p_.config;
  const DeviceWeights& weights = p_.weights;
  const StepBuffers& b = p_.buffers;
  gpu::EmbedNormArgs e;
  e.dtype = weights.dtype;
  e.embed = weights.embed;
  e.token_ids = s.token_ids;
  // Feedback rows' tokens: the previous step's samples, still in the results buffer this step's
  // sampling overwrites only after the embedding ran.
  e.feedback_ids = &b.results()->token_id;
  e.feedback_stride = sizeof(gpu::SampleRowResult) / sizeof(int32_t);
  e.num_tokens = s.tokens;
  e.hidden = c.hidden_size;
  e.norm_weight = weights.layers[0].input_norm;
  e.eps = c.rms_norm_eps;
  e.x = b.x();
  e.xn = b.xn();
  // The fused q/k/v GEMV of layer 0 norms x itself from the embedding's sums of squares.
  e.sum_sq = f_.fused ? p_.fused.sum_sq_mlp() : nullptr;
  // Tensor parallel: a vocabulary-parallel embedding, all-reduced (tp_hooks.h).
  PKV_RETURN_IF_ERROR(p_.tp != nullptr ? p_.tp->EnqueueEmbed(c, weights, b, s, p_.stream)
                                       : gpu::LaunchEmbedRmsNorm(e, p_.stream));
  for (int l = 0; l < c.num_layers; ++l) {
    PKV_RETURN_IF_ERROR(f_.fused ? EnqueueFusedLayer(l, s) : EnqueueLayer(l, s));
  }
  if (f_.fused) return EnqueueFusedHead(s);
  if (s.logit_rows == 0) return absl::OkStatus();
  PKV_RETURN_IF_ERROR(p_.gemm.Linear(weights.dtype, b.final_xn(), s.logit_rows, c.hidden_size,
                                     weights.lm_head, c.vocab_size, b.logits(), true, p_.stream));
  return p_.tp != nullptr ? p_.tp->EnqueueLogits(b.logits(), s, p_.stream) : absl::OkStatus();
}

// One layer on cuBLAS and the unfused kernels; its closing add + norm feeds the next layer (the
// last layer's: the final norm of the sampled tokens).
absl::Status ForwardPass::EnqueueLayer(int l, const DeviceStep& s) const {
  const ModelConfig& c = p_.config;
  const StepBuffers& b = p_.buffers;
  const cudaStream_t stream = p_.stream;
  const gpu::DType dt = p_.weights.dtype;
  const int64_t t = s.tokens, h = c.hidden_size;
  const bool pdl = f_.pdl;
  const LayerWeights& w = p_.weights.layers[l];
  PKV_RETURN_IF_ERROR(Linear(b.xn(), t, w.qkv, b.qkv(), true));
  PKV_RETURN_IF_ERROR(EnqueueQkvRope(l, s));
  if (!f_.skip_attention) {
    PKV_RETURN_IF_ERROR(p_.kv.EnqueueAttention(l, s, b.q(), b.attn(), stream, f_.pdl_attention));
  }
  PKV_RETURN_IF_ERROR(Linear(b.attn(), t, w.o, b.delta(), false));
  // Tensor parallel: o_proj is row-parallel; sum the ranks' partials before the residual add.
  if (p_.tp != nullptr) PKV_RETURN_IF_ERROR(p_.tp->AllReduce(b.delta(), t * h, dt, stream));

  gpu::AddNormArgs n;
  n.dtype = dt;
  n.x = b.x();
  n.delta = b.delta();
  n.bias = w.o_bias;
  n.num_out = s.tokens;
  n.hidden = c.hidden_size;
  n.norm_weight = w.post_norm;
  n.eps = c.rms_norm_eps;
  n.xn = b.xn();
  n.pdl = pdl;
  PKV_RETURN_IF_ERROR(gpu::LaunchAddRmsNorm(n, stream));
  PKV_RETURN_IF_ERROR(Linear(b.xn(), t, w.gate_up, b.gate_up(), false));
  PKV_RETURN_IF_ERROR(
      gpu::LaunchSiluMul(dt, b.gate_up(), t, c.intermediate_size, b.act(), stream, pdl));
  PKV_RETURN_IF_ERROR(Linear(b.act(), t, w.down, b.delta(), false));
  // Row-parallel down projection, like o_proj.
  if (p_.tp != nullptr) PKV_RETURN_IF_ERROR(p_.tp->AllReduce(b.delta(), t * h, dt, stream));

  n.bias = nullptr;
  if (l + 1 < c.num_layers) {
    n.norm_weight = p_.weights.layers[l + 1].input_norm;
  } else {  // the final norm, for the sampled tokens only
    n.norm_weight = p_.weights.final_norm;
    n.rows = s.sample_token;
    n.num_out = s.logit_rows;
    n.write_x = false;
    n.xn = b.final_xn();
  }
  return gpu::LaunchAddRmsNorm(n, stream);
}

absl::Status ForwardPass::EnqueueSample(const DeviceStep& s) const {
  gpu::SampleArgs a;
  a.logits = p_.buffers.logits();
  a.vocab = p_.config.vocab_size;
  if (p_.tp != nullptr) {  // tensor parallel: the gathered logits, sampled on one rank only
    if (p_.tp->sample_logits() == nullptr) return absl::OkStatus();
    a.logits = p_.tp->sample_logits();
    a.vocab = p_.tp->full_vocab();
  }
  a.params = s.sample_params;
  a.num_rows = s.header + 2;
  a.max_rows = s.logit_rows;
  a.results = p_.buffers.results();
  a.top = p_.buffers.top();
  a.workspace = p_.buffers.sample_workspace();
  return gpu::LaunchSample(a, p_.stream);
}

}  // namespace pkv::cuda_backend
