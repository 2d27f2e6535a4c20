#include "worker/cuda_backend/step_buffers.h"

#include "common/status_macros.h"

namespace pkv::cuda_backend {

absl::StatusOr<StepBuffers> StepBuffers::Allocate(const ModelConfig& c, int32_t max_tokens,
                                                  int32_t max_rows, cudaStream_t stream) {
  const int64_t t = max_tokens, r = max_rows;
  const int64_t h = c.hidden_size, d = c.head_dim, e = 2;  // fp16 / bf16 element bytes
  const int64_t qd = int64_t{c.num_q_heads} * d, kvd = int64_t{c.num_kv_heads} * d;
  const int64_t inter = c.intermediate_size;
  const cudaStream_t s = stream;
  StepBuffers b;
  PKV_ASSIGN_OR_RETURN(b.x_, DeviceBuffer::AllocateZeroed(t * h * 4, s));
  PKV_ASSIGN_OR_RETURN(b.xn_, DeviceBuffer::AllocateZeroed(t * h * e, s));
  PKV_ASSIGN_OR_RETURN(b.qkv_, DeviceBuffer::AllocateZeroed(t * (qd + 2 * kvd) * 4, s));
  PKV_ASSIGN_OR_RETURN(b.q_, DeviceBuffer::AllocateZeroed(t * qd * e, s));
  PKV_ASSIGN_OR_RETURN(b.attn_, DeviceBuffer::AllocateZeroed(t * qd * e, s));
  PKV_ASSIGN_OR_RETURN(b.delta_, DeviceBuffer::AllocateZeroed(t * h * e, s));
  PKV_ASSIGN_OR_RETURN(b.gate_up_, DeviceBuffer::AllocateZeroed(t * 2 * inter * e, s));
  PKV_ASSIGN_OR_RETURN(b.act_, DeviceBuffer::AllocateZeroed(t * inter * e, s));
  PKV_ASSIGN_OR_RETURN(b.final_xn_, DeviceBuffer::AllocateZeroed(r * h * e, s));
  PKV_ASSIGN_OR_RETURN(b.logits_, DeviceBuffer::AllocateZeroed(r * c.vocab_size * 4, s));
  const int64_t results_bytes = r * int64_t{sizeof(gpu::SampleRowResult)};
  PKV_ASSIGN_OR_RETURN(b.results_, DeviceBuffer::AllocateZeroed(results_bytes, s));
  const int64_t top_bytes = r * gpu::kMaxTopLogprobs * int64_t{sizeof(gpu::TopLogprob)};
  PKV_ASSIGN_OR_RETURN(b.top_, DeviceBuffer::AllocateZeroed(top_bytes, s));
  const int64_t sample_bytes = gpu::SampleWorkspaceBytes(max_rows);
  PKV_ASSIGN_OR_RETURN(b.sample_workspace_, DeviceBuffer::AllocateZeroed(sample_bytes, s));
  for (int slot = 0; slot < kHostSlots; ++slot) {
    PKV_ASSIGN_OR_RETURN(b.results_host_[slot], PinnedBuffer::Allocate(results_bytes));
    PKV_ASSIGN_OR_RETURN(b.top_host_[slot], PinnedBuffer::Allocate(top_bytes));
  }
  return b;
}

absl::Status StepBuffers::ReplaceLogits(int64_t floats, cudaStream_t stream) {
  PKV_ASSIGN_OR_RETURN(logits_, DeviceBuffer::Allocate(floats * 4));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(logits_.get(), 0, floats * 4, stream));
  return absl::OkStatus();
}

}  // namespace pkv::cuda_backend
