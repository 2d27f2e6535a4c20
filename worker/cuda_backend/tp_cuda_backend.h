// The CUDA model backend split over tp GPUs (or tp ranks of one GPU) with Megatron-style tensor
// parallelism: the ModelBackend contract of CudaModelBackend, with the sharding, collective
// placement and lockstep of the CPU backend's TpCpuBackend (worker/model/tp_cpu_backend.h), which
// is its reference.
//
// Ranks are threads of this process (RankThreads; rank 0 runs on the caller, the engine's
// scheduler thread). Each rank owns a CudaModelBackend::Impl on its device: its stream, its weight
// shard (tp_shard.h: column-parallel q/k/v and gate/up, row-parallel o_proj and down,
// vocabulary-parallel embedding and LM head; only the rank's bytes of the checkpoint are read;
// quantized (AWQ, GPTQ, FP8) projections are cut by the CPU ranks' rule, on whole 4-bit groups,
// and packed like the one-GPU backend's), its KV pool of H_kv / tp heads for every page id of the
// scheduler's one pool (in the KV cache dtype, FP8 pages with the checkpoint's per-layer scales:
// a scale covers all of a layer's heads), its decode engine and workspaces, its CUDA graphs. The
// forward pass is the one-GPU code with TpHooks (tp_hooks.h / tp_rank_hooks.h) at the collective
// points: one all-reduce after each row-parallel projection, the embedding all-reduce and the
// logits all-gather.
//
// Per step: the batch is validated and built once on the calling thread (errors return before
// any rank runs), every rank stages it (its own decode plan for its head count), enqueues the
// forward pass, and rank 0 gathers the full logits, samples and returns the tokens.
//
// Communicators (DeviceCommunicator): ranks on distinct GPUs use NCCL (one rank per GPU; needs
// PKV_HAVE_NCCL); ranks that all share one GPU use SharedDeviceGroup (a single-GPU test and
// experiment mode). Other device lists are refused.
// CUDA graphs: with NCCL, decode steps are captured per rank with the NCCL calls inside the graph
// (NCCL supports stream capture); with the shared-device group they run eagerly (its host
// barriers cannot be captured). The fused small-batch path is not sharded: TP ranks run the
// cuBLAS path at every batch size (a packed projection dequantized into scratch first).
// Results: TP = 1 over NCCL computes what CudaModelBackend does (the hooks' collectives are
// identities). TP > 1 splits the row-parallel sums and rounds each rank's partial output to the
// 16-bit dtype before the all-reduce, so logits differ from TP = 1 within bf16/fp16 rounding.
//
// Errors: a rank failing while enqueueing aborts the group (ranks waiting in a collective return)
// and the backend refuses every later step (the worker treats the error as fatal).
// Thread-safety: not thread-safe (ModelBackend contract); owns its rank threads and streams.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/model/model_backend.h"
#include "worker/model/model_config.h"

namespace pkv {

struct TpCudaOptions {
  // Every rank's backend options (device is ignored: `devices` places the ranks). The KV pool:
  // num_kv_pages on every rank if set; otherwise rank 0 takes kv_memory_fraction of its device's
  // free memory divided by the ranks sharing that device, and every rank gets that many pages.
  CudaBackendOptions backend;
  std::vector<int> devices;  // [tp] CUDA device of each rank: all distinct, or all the same
  // auto: nccl for distinct devices, shared for one device; nccl also runs tp = 1 (tests).
  std::string communicator = "auto";
};

// The device list --tp N gets without --tp_devices: first, first + 1, ..., first + tp - 1.
std::vector<int> ConsecutiveDevices(int first, int tp);

class TpCudaBackend : public ModelBackend {
 public:
  // Loads <model_dir> split devices.size() ways. INVALID_ARGUMENT for a model the split does not
  // divide (naming the field and the valid --tp values), a bad device list or communicator;
  // UNIMPLEMENTED for distinct devices in a build without NCCL.
  static absl::StatusOr<std::unique_ptr<TpCudaBackend>> Load(const std::string& model_dir,
                                                             const TpCudaOptions& options);
  // Random weights of `config`'s shapes generated on each rank (benchmarks): the shards do not
  // form one consistent model across different tp, only the shapes and the work are real.
  static absl::StatusOr<std::unique_ptr<TpCudaBackend>> LoadRandom(const ModelConfig& config,
                                                                   uint64_t seed,
                                                                   const TpCudaOptions& options);
  ~TpCudaBackend() override;

  const ModelConfig& config() const override { return config_; }
  int32_t page_size() const override;
  int64_t num_kv_pages() const override { return num_kv_pages_; }
  std::string backend_name() const override { return "cuda"; }
  std::string dtype_name() const override;
  // Every rank's pages hold this (the prefix-cache salt, ModelInfo and metrics read it as they do
  // the one-GPU backend's).
  KvCacheDtype kv_cache_dtype() const override;

  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats) override;
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) override;

  int tp() const { return static_cast<int>(devices_.size()); }
  const std::vector<int>& devices() const { return devices_; }
  std::string transport() const;  // the communicator's description
  bool cuda_graphs() const;       // decode steps replay CUDA graphs
  void SetCudaGraphs(bool enabled);
  // Every rank's KV pool overwritten with random values (benchmarks). Synchronous.
  absl::Status FillKvCacheRandom(uint64_t seed);

  // Times every collective with CUDA events (turns CUDA graphs off while on: eager steps).
  void SetTimeCollectives(bool enabled);
  // Rank 0's GPU microseconds inside the last step's collectives (0 unless timing is on) and the
  // number of collectives it ran (2 per layer + 2).
  double last_collective_us() const { return last_collective_us_; }
  int32_t last_num_collectives() const;
  // Rank 0's host timing of the last step (the batch build included in prep_us).
  const StepTiming& last_timing() const { return timing_; }
  int64_t rank_weight_bytes() const;       // rank 0's weight arena
  int64_t rank_weight_read_bytes() const;  // weight bytes rank 0 reads a decode step
  int64_t rank_kv_bytes() const;           // rank 0's KV pool

  class Ranks;  // tp_cuda_backend.cc: the per-rank state

 private:
  TpCudaBackend(const ModelConfig& config, const TpCudaOptions& options);
  // tp_cuda_load.cc: after every rank's weights are up: communicators, hooks, KV pools, builder.
  absl::Status Finish(bool shared, const std::string& source);
  // One step on every rank: stage `batch_`, enqueue, then rank 0 samples (samples != nullptr) or
  // copies the full logits out (logits != nullptr).
  absl::Status RunRanks(bool sample, std::vector<SampleResult>* samples,
                        std::vector<float>* logits);

  const ModelConfig config_;
  const TpCudaOptions options_;
  const std::vector<int> devices_;
  int64_t num_kv_pages_ = 0;
  std::unique_ptr<Ranks> ranks_;
  StepTiming timing_;
  double last_collective_us_ = 0;
};

// TpCudaBackend::Load as a ModelBackend (the worker's --backend=cuda --tp N).
absl::StatusOr<std::unique_ptr<ModelBackend>> LoadTpCudaBackend(const std::string& model_dir,
                                                                const TpCudaOptions& options);

}  // namespace pkv
