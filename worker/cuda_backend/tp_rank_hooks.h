// One tensor-parallel rank's TpHooks (tp_hooks.h): the rank's collectives over its
// DeviceCommunicator and the buffers they need, the same placement as the CPU backend's TpRank
// (worker/model/tp_rank.h):
//   embedding   EmbedShard (the rank's vocabulary rows, zeros elsewhere) into delta ->
//               AllReduceSum (16-bit, exact) -> add-norm into x = embedding, xn = layer 0 input;
//   o / down    AllReduceSum of delta (16-bit) after the row-parallel GEMM;
//   logits      AllGather of every rank's [rows][chunk] padded slice -> on the sampling rank,
//               GatherVocabShards into the full [rows][V] logits the sampler reads.
// So 2 all-reduces a layer, one for the embedding and one all-gather a step, like the CPU ranks.
//
// Optional timing (eager steps only: CUDA events between kernels of a captured graph would not
// measure anything): with time_collectives on, every collective is bracketed by a pair of CUDA
// events; collective_us() sums their elapsed times after the step's stream synchronisation (so it
// includes waiting for the slowest rank, as NCCL's kernels do).
// Thread-safety: the rank's thread only. Ownership: owns its buffers and events; comm not owned.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/tp_hooks.h"
#include "worker/model/model_config.h"
#include "worker/model/tp_shard.h"
#include "worker/parallel/device_communicator.h"

namespace pkv::cuda_backend {

class TpRankHooks : public TpHooks {
 public:
  // `full`: the whole model's config; max_rows: logit rows a step may have; sampling: this rank
  // gathers the full logits and samples. Allocates on comm->device() (made current).
  static absl::StatusOr<std::unique_ptr<TpRankHooks>> Create(DeviceCommunicator* comm,
                                                             const ModelConfig& full,
                                                             int32_t max_rows, bool sampling);
  ~TpRankHooks() override;

  absl::Status EnqueueEmbed(const ModelConfig& c, const DeviceWeights& w, const StepBuffers& b,
                            const DeviceStep& s, cudaStream_t stream) override;
  absl::Status AllReduce(void* data, int64_t count, decode::DType dtype,
                         cudaStream_t stream) override;
  absl::Status EnqueueLogits(const float* logits, const DeviceStep& s,
                             cudaStream_t stream) override;
  const float* sample_logits() const override;
  int32_t full_vocab() const override { return vocab_size_; }

  // Floats the rank's LM-head output buffer (StepBuffers::logits) must hold: the all-gather sends
  // [rows][chunk] from it, chunk >= the rank's vocabulary slice.
  int64_t logits_floats() const { return int64_t{max_rows_} * vocab_.chunk; }
  const VocabShard& vocab() const { return vocab_; }
  DeviceCommunicator* comm() const { return comm_; }

  void set_time_collectives(bool on) { time_collectives_ = on; }
  // Call before enqueueing a step: forgets the previous step's timed collectives.
  void BeginStep() { num_collectives_ = 0; }
  // After the step's stream synchronisation: GPU microseconds inside this step's collectives
  // (0 when timing is off) and how many collectives the step ran.
  absl::StatusOr<double> collective_us() const;
  int32_t num_collectives() const { return num_collectives_; }

 private:
  TpRankHooks(DeviceCommunicator* comm, const ModelConfig& full, int32_t max_rows, bool sampling);
  // Runs one collective, bracketed by timing events when timing is on.
  template <typename Fn>
  absl::Status Timed(cudaStream_t stream, Fn&& collective);

  DeviceCommunicator* const comm_;
  const int32_t vocab_size_;  // the whole model's V
  const int32_t max_rows_;
  const bool sampling_;
  const VocabShard vocab_;
  DeviceBuffer gathered_;     // float [tp][max_rows * chunk]: every rank's padded logits slice
  DeviceBuffer full_logits_;  // float [max_rows][V], sampling rank only
  bool time_collectives_ = false;
  int32_t num_collectives_ = 0;
  std::vector<cudaEvent_t> events_;  // [2 * (2 L + 2)]: start, stop of each collective
};

}  // namespace pkv::cuda_backend
