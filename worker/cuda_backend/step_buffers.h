// The device scratch of one step: the activations of the forward pass for up to max_tokens tokens
// (T) and max_rows logit rows (R), the logits, the sampler's results and their pinned host copies.
// Allocated once at load and zeroed, so the padding rows of graph steps start from finite values;
// nothing is allocated per step, and the addresses never move (captured CUDA graphs bake them in),
// except ReplaceLogits at load.
// Thread-safety: not thread-safe (owned by the backend; its stream's thread writes it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/model/sampling_types.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

class StepBuffers {
 public:
  StepBuffers() = default;

  // Allocates (in this order, which fixes the free memory the KV pool sizes itself from) and
  // zeroes on `stream` the buffers of `c`'s shapes. Activations are 16-bit (fp16 / bf16) except
  // the fp32 residual stream, the fp32 q/k/v and the fp32 logits.
  static absl::StatusOr<StepBuffers> Allocate(const ModelConfig& c, int32_t max_tokens,
                                              int32_t max_rows, cudaStream_t stream);

  // Tensor parallel: the LM head writes this rank's vocabulary slice padded to the all-gather's
  // chunk, so logits becomes a zeroed float [floats] buffer. Load time only (before any capture).
  absl::Status ReplaceLogits(int64_t floats, cudaStream_t stream);

  float* x() const { return static_cast<float*>(x_.get()); }  // [T][hidden] residual stream
  void* xn() const { return xn_.get(); }  // dtype [T][hidden] normed block input
  float* qkv() const { return static_cast<float*>(qkv_.get()); }  // [T][(H_q + 2 H_kv) D]
  void* q() const { return q_.get(); }                // dtype [T][H_q][D] rotated queries
  void* attn() const { return attn_.get(); }          // dtype [T][H_q][D]
  void* delta() const { return delta_.get(); }        // dtype [T][hidden] o / down output
  void* gate_up() const { return gate_up_.get(); }    // dtype [T][2 I]
  void* act() const { return act_.get(); }            // dtype [T][I]
  void* final_xn() const { return final_xn_.get(); }  // dtype [R][hidden]
  float* logits() const { return static_cast<float*>(logits_.get()); }  // [R][V]
  gpu::SampleRowResult* results() const {                               // [R]
    return static_cast<gpu::SampleRowResult*>(results_.get());
  }
  gpu::TopLogprob* top() const {  // [R][kMaxTopLogprobs]
    return static_cast<gpu::TopLogprob*>(top_.get());
  }
  void* sample_workspace() const { return sample_workspace_.get(); }  // [SampleWorkspaceBytes(R)]
  // Pinned host copies of results() and top(), same shapes, one per launched step that may be
  // unfinished (a step's copy may land while the host still reads the previous step's).
  static constexpr int kHostSlots = 2;
  gpu::SampleRowResult* results_host(int slot) const {
    return static_cast<gpu::SampleRowResult*>(results_host_[slot].get());
  }
  gpu::TopLogprob* top_host(int slot) const {
    return static_cast<gpu::TopLogprob*>(top_host_[slot].get());
  }

 private:
  DeviceBuffer x_, xn_, qkv_, q_, attn_, delta_, gate_up_, act_, final_xn_, logits_, results_, top_,
      sample_workspace_;
  PinnedBuffer results_host_[kHostSlots], top_host_[kHostSlots];
};

}  // namespace pkv::cuda_backend
