#include "worker/cuda_backend/tp_rank_hooks.h"

#include <utility>

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/tp_kernels.h"

namespace pkv::cuda_backend {
namespace {

CollectiveDType ActivationType(decode::DType dtype) {
  return dtype == decode::DType::kFloat16 ? CollectiveDType::kFloat16 : CollectiveDType::kBFloat16;
}

}  // namespace

TpRankHooks::TpRankHooks(DeviceCommunicator* comm, const ModelConfig& full, int32_t max_rows,
                         bool sampling)
    : comm_(comm),
      vocab_size_(full.vocab_size),
      max_rows_(max_rows),
      sampling_(sampling),
      vocab_(VocabShardOf(full.vocab_size, comm->world_size(), comm->rank())) {}

TpRankHooks::~TpRankHooks() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

absl::StatusOr<std::unique_ptr<TpRankHooks>> TpRankHooks::Create(DeviceCommunicator* comm,
                                                                 const ModelConfig& full,
                                                                 int32_t max_rows, bool sampling) {
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(comm->device()));
  std::unique_ptr<TpRankHooks> h(new TpRankHooks(comm, full, max_rows, sampling));
  const int64_t chunk = h->vocab_.chunk;
  PKV_ASSIGN_OR_RETURN(h->gathered_,
                       DeviceBuffer::Allocate(int64_t{comm->world_size()} * max_rows * chunk * 4));
  if (sampling) {
    PKV_ASSIGN_OR_RETURN(h->full_logits_,
                         DeviceBuffer::Allocate(int64_t{max_rows} * full.vocab_size * 4));
  }
  h->events_.resize(2 * (2 * full.num_layers + 2), nullptr);
  for (cudaEvent_t& e : h->events_) PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  return h;
}

template <typename Fn>
absl::Status TpRankHooks::Timed(cudaStream_t stream, Fn&& collective) {
  const size_t k = static_cast<size_t>(num_collectives_++);
  const bool timed = time_collectives_ && 2 * k + 1 < events_.size();
  if (timed) PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2 * k], stream));
  PKV_RETURN_IF_ERROR(collective());
  if (timed) PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2 * k + 1], stream));
  return absl::OkStatus();
}

absl::StatusOr<double> TpRankHooks::collective_us() const {
  if (!time_collectives_) return 0.0;
  double us = 0;
  for (size_t k = 0; k < static_cast<size_t>(num_collectives_) && 2 * k + 1 < events_.size(); ++k) {
    float ms = 0;
    PKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[2 * k], events_[2 * k + 1]));
    us += ms * 1e3;
  }
  return us;
}

absl::Status TpRankHooks::EnqueueEmbed(const ModelConfig& c, const DeviceWeights& w,
                                       const StepBuffers& b, const DeviceStep& s,
                                       cudaStream_t stream) {
  EmbedShardArgs e;
  e.dtype = w.dtype;
  e.embed = w.embed;
  e.token_ids = s.token_ids;
  e.num_tokens = s.tokens;
  e.hidden = c.hidden_size;
  e.vocab_begin = vocab_.begin;
  e.vocab_end = vocab_.end;
  e.x = b.x();
  e.out = b.delta();
  PKV_RETURN_IF_ERROR(LaunchEmbedShard(e, stream));
  PKV_RETURN_IF_ERROR(AllReduce(b.delta(), int64_t{s.tokens} * c.hidden_size, w.dtype, stream));
  // x = 0 + embedding (exact in float32), xn = layer 0's normed input, as LaunchEmbedRmsNorm.
  gpu::AddNormArgs n;
  n.dtype = w.dtype;
  n.x = b.x();
  n.delta = b.delta();
  n.num_out = s.tokens;
  n.hidden = c.hidden_size;
  n.norm_weight = w.layers[0].input_norm;
  n.eps = c.rms_norm_eps;
  n.xn = b.xn();
  return gpu::LaunchAddRmsNorm(n, stream);
}

absl::Status TpRankHooks::AllReduce(void* data, int64_t count, decode::DType dtype,
                                    cudaStream_t stream) {
  return Timed(stream, [&] { return comm_->AllReduceSum(data, count, ActivationType(dtype)); });
}

absl::Status TpRankHooks::EnqueueLogits(const float* logits, const DeviceStep& s,
                                        cudaStream_t stream) {
  const int64_t count = int64_t{s.logit_rows} * vocab_.chunk;
  float* gathered = static_cast<float*>(gathered_.get());
  PKV_RETURN_IF_ERROR(Timed(stream, [&] { return comm_->AllGather(logits, count, gathered); }));
  if (!sampling_) return absl::OkStatus();
  return LaunchGatherVocabShards(gathered, s.logit_rows, comm_->world_size(), vocab_.chunk,
                                 vocab_size_, static_cast<float*>(full_logits_.get()), stream);
}

const float* TpRankHooks::sample_logits() const {
  return sampling_ ? static_cast<const float*>(full_logits_.get()) : nullptr;
}

}  // namespace pkv::cuda_backend
