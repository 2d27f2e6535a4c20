// The points where a tensor-parallel rank's forward pass differs from the one-GPU pass: the CUDA
// backend's ForwardPass (forward.h) calls these when the rank has hooks, and never otherwise, so a
// one-GPU backend runs exactly its own code. Implemented by the tensor-parallel backend
// (tp_cuda_backend.h), which owns one TpHooks per rank.
//
// Per step, on every rank's stream, in this order (Megatron layout, worker/model/tp_shard.h):
//   EnqueueEmbed      replaces the embedding + layer 0's input norm: the rank's vocabulary rows,
//                     zeros for other tokens, all-reduced (exact: one rank contributes each row);
//   AllReduce         after each row-parallel projection (o_proj, down): sums the partial
//                     outputs in place, before the residual add + RMSNorm that reads them;
//   EnqueueLogits     after the LM head wrote this rank's vocabulary slice of the logits:
//                     all-gathers every rank's slice into [logit_rows][V] on the sampling rank.
// EnqueueSample then reads sample_logits() (full vocabulary) on the sampling rank; other ranks
// sample nothing (sample_logits() == nullptr).
// Like forward.cc, hooks only enqueue (eager steps and CUDA-graph capture alike).
// Thread-safety: called on the rank's thread only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/decode/decode_params.h"
#include "worker/cuda_backend/device_step.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/step_buffers.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

class TpHooks {
 public:
  virtual ~TpHooks() = default;

  // Writes b.x() (float [tokens][hidden]) = the embedding and b.xn() = RMSNorm(x) * layer 0's
  // input norm, as LaunchEmbedRmsNorm does on one GPU (b.delta() is scratch). `c`: the rank's
  // config; `w`: its weight shard.
  virtual absl::Status EnqueueEmbed(const ModelConfig& c, const DeviceWeights& w,
                                    const StepBuffers& b, const DeviceStep& s,
                                    cudaStream_t stream) = 0;
  // In-place sum over the ranks. data: device [count] of the 16-bit `dtype`.
  virtual absl::Status AllReduce(void* data, int64_t count, decode::DType dtype,
                                 cudaStream_t stream) = 0;
  // After the LM head: logits holds [s.logit_rows][local vocab] float (rows padded to the
  // hooks' chunk: StepBuffers::ReplaceLogits).
  virtual absl::Status EnqueueLogits(const float* logits, const DeviceStep& s,
                                     cudaStream_t stream) = 0;
  // Full-vocabulary logits [logit_rows][full_vocab()] on the sampling rank; nullptr elsewhere.
  virtual const float* sample_logits() const = 0;
  virtual int32_t full_vocab() const = 0;
};

}  // namespace pkv::cuda_backend
