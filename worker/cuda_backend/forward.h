// One step's forward pass and sampling as a sequence of launches on the backend's stream: from the
// embedding to the logits of the step's logit rows (forward.cc: the cuBLAS path; fused_forward.cc:
// the fused small-batch path), then the sampling kernel. Used as is for eager steps and under
// stream capture for CUDA graphs, so it only enqueues: no allocation, no synchronisation, no host
// reads of device data.
//
// A ForwardPass borrows the backend's parts for one step (it owns nothing and lives inside one
// Run): it reads the weights, writes the step buffers and the KV pages of the step's tokens. With
// tensor-parallel hooks (tp_hooks.h) it calls them at the collective points; without, it runs only
// the one-GPU code.
// Thread-safety: the thread that runs the backend's steps.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/model/gemv.h"
#include "worker/cuda_backend/device_step.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/fused_path.h"
#include "worker/cuda_backend/gemm.h"
#include "worker/cuda_backend/kv_attention.h"
#include "worker/cuda_backend/packed_linear.h"
#include "worker/cuda_backend/step_buffers.h"
#include "worker/cuda_backend/tp_hooks.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

// The backend parts a forward pass uses. Not owned.
struct ForwardParts {
  const ModelConfig& config;  // this rank's shapes (tensor parallel: the shard's)
  const DeviceWeights& weights;
  Gemm& gemm;
  const KvAttention& kv;
  const StepBuffers& buffers;
  const FusedPath& fused;
  const PackedLinear& packed;  // projections of packed weights (with weights.dequant_scratch)
  TpHooks* tp;                 // null on one GPU
  cudaStream_t stream;
};

// Steps of at most this many tokens launch decode attention as a programmatic dependent of the
// kernel before it (with pdl). Measured on the H200 (results/2026-12-03-h200-attnpdl): 8B B=1
// fused 1.3% faster, B=8 on cuBLAS 1.2%; bimodal B=64 1.4% (8B) to 6% (1B) slower, so larger
// steps launch it plainly.
inline constexpr int32_t kPdlAttentionMaxTokens = 8;

// The per-step choices the backend made (CudaBackendOptions, the device, the step's size).
struct ForwardFlags {
  bool fused = false;          // the fused small-batch path (REQUIRES: parts.fused.available())
  bool pdl = false;            // programmatic dependent launch
  bool pdl_attention = false;  // pdl for decode attention too (kPdlAttentionMaxTokens)
  int32_t prefetch_steps = 0;  // fused GEMVs' L2 prefetch with pdl
  bool prenorm = false;        // fused: RMSNorm launches feed plain-input q/k/v, gate/up GEMVs
  uint32_t gemv_bulk = 0;      // fused: the FusedBulk projections that ask for GemvArgs::bulk
  // Timing knockout, benchmarks only: no attention launch (its output is stale), so a step's time
  // without it says what attention costs on the critical path (CudaModelBackend::
  // SetSkipAttentionForTiming).
  bool skip_attention = false;
};

class ForwardPass {
 public:
  ForwardPass(const ForwardParts& parts, const ForwardFlags& flags) : p_(parts), f_(flags) {}

  // Everything from the embedding to the logits of s.logit_rows (buffers.logits()).
  absl::Status EnqueueForward(const DeviceStep& s) const;
  // The sampling kernel over the logits into buffers.results() / top().
  absl::Status EnqueueSample(const DeviceStep& s) const;

 private:
  // fp32 q/k/v in `qkv` -> bias, q/k norm, RoPE, q to `q`, k/v into the layer's KV pages.
  absl::Status EnqueueQkvRope(int layer, const DeviceStep& s) const;
  absl::Status EnqueueLayer(int layer, const DeviceStep& s) const;
  // y = x . w^T on cuBLAS; a packed projection through PackedLinear (the quantized-weight GEMM,
  // or dequantized into the weights' scratch for cuBLAS).
  absl::Status Linear(const void* x, int64_t tokens, const ProjectionWeights& w, void* y,
                      bool y_f32) const;
  // fused_forward.cc
  absl::Status EnqueueFusedLayer(int layer, const DeviceStep& s) const;
  absl::Status EnqueueFusedHead(const DeviceStep& s) const;
  // The block input of a normalized-input projection (q/k/v, gate/up) into `a`: the residual
  // stream with its norm weight and sums-of-squares parts, or (flags.prenorm) the rows
  // normalized by one RMSNorm launch into the xn buffer, as plain input.
  absl::Status SetFusedInput(const DeviceStep& s, const float* norm_weight,
                             const float* sum_sq_parts, int32_t num_sum_sq_parts,
                             gpu::GemvArgs* a) const;

  const ForwardParts p_;
  const ForwardFlags f_;
};

}  // namespace pkv::cuda_backend
