// The points where a tensor-parallel rank's forward pass differs from the one-GPU pass: the CUDA
// backend's enqueue functions (forward.cc) call these when CudaModelBackend::Impl::tp is set, and
// never otherwise, so a one-GPU backend runs exactly its own code. Implemented by the
// tensor-parallel backend (tp_cuda_backend.h), which owns one TpHooks per rank.
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

#include <cstdint>

#include "absl/status/status.h"
#include "worker/cuda_backend/cuda_backend.h"

namespace pkv {

struct DeviceStep;  // backend_impl.h

namespace cuda_backend {

class TpHooks {
 public:
  virtual ~TpHooks() = default;

  // Writes m.x (float [tokens][hidden]) = the embedding and m.xn = RMSNorm(x) * layer 0's
  // input norm, as LaunchEmbedRmsNorm does on one GPU.
  virtual absl::Status EnqueueEmbed(CudaModelBackend::Impl& m, const DeviceStep& s) = 0;
  // In-place sum over the ranks. data: device [count] of the backend's 16-bit dtype.
  virtual absl::Status AllReduce(CudaModelBackend::Impl& m, void* data, int64_t count) = 0;
  // After the LM head: m.logits holds [s.logit_rows][local vocab] float.
  virtual absl::Status EnqueueLogits(CudaModelBackend::Impl& m, const DeviceStep& s) = 0;
  // Full-vocabulary logits [logit_rows][full_vocab()] on the sampling rank; nullptr elsewhere.
  virtual const float* sample_logits() const = 0;
  virtual int32_t full_vocab() const = 0;
};

}  // namespace cuda_backend
}  // namespace pkv
