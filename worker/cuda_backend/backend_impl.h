// CudaModelBackend's state (internal to worker/cuda_backend): a short composition of owned parts,
// each with its own header and contract:
//   DeviceStream   the device and the one stream every launch and copy goes on
//   DeviceWeights  the weights (or a tensor-parallel rank's shard), immutable after upload
//   Gemm           cuBLAS / cuBLASLt projections (and their tuning)
//   KvAttention    the KV pool, the RoPE table and the attention over the pool
//   StepBuffers    a step's device scratch: activations, logits, sampling results
//   FusedPath      the fused small-batch path's plans and workspace, and PDL
//   StepStaging    the step builder and the staging image (host -> device)
//   GraphCache     the decode steps' CUDA graphs and when to capture them
// The Impl holds the options, decides per step what runs (the graph bucket, the fused path, PDL)
// and times the step; ForwardPass (forward.h) enqueues the step's kernels over the parts.
//
// Lifecycle: Start (options, device, stream) -> SetModel (config and weights, uploaded on
// stream()) -> Finish (every other part, in the order that sizes the KV pool) -> steps. A
// tensor-parallel backend (tp_cuda_backend.h) runs one Impl per rank through the same interface,
// with its hooks attached between SetModel and the first step.
// Thread-safety: not thread-safe; one thread runs the steps (a rank's thread under tensor
// parallelism), with the device made current by the caller.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/device_step.h"
#include "worker/cuda_backend/device_stream.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/forward.h"
#include "worker/cuda_backend/fused_path.h"
#include "worker/cuda_backend/gemm.h"
#include "worker/cuda_backend/graph_cache.h"
#include "worker/cuda_backend/kv_attention.h"
#include "worker/cuda_backend/packed_linear.h"
#include "worker/cuda_backend/step_buffers.h"
#include "worker/cuda_backend/step_builder.h"
#include "worker/cuda_backend/step_staging.h"
#include "worker/cuda_backend/tp_hooks.h"
#include "worker/model/model_backend.h"
#include "worker/model/model_config.h"

namespace pkv {

class CudaModelBackend::Impl {
 public:
  // backend_load.cc: validates `options`, makes options.device current, creates the stream.
  static absl::StatusOr<std::unique_ptr<Impl>> Start(const CudaBackendOptions& options);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // The model (a tensor-parallel rank: its shard's config) and its weights, uploaded on stream().
  void SetModel(const ModelConfig& config, cuda_backend::DeviceWeights weights);
  // REQUIRES: before Finish. Overrides options.num_kv_pages (a tensor-parallel rank r > 0 takes
  // rank 0's count, so a page id names the same tokens on every rank).
  void SetKvPages(int64_t num_pages) { options_.num_kv_pages = num_pages; }
  // REQUIRES: before Finish. The FP8 KV cache's per-layer scales from the checkpoint
  // (worker/model/kv_cache_scales.h); none: 1.0 for every layer.
  void SetKvCacheScales(std::vector<Fp8KvScales> scales) { kv_cache_scales_ = std::move(scales); }
  // REQUIRES: before Finish. Divides the KV pool's share of the free memory (ranks sharing a GPU).
  void ShareKvMemory(int ranks) { options_.kv_memory_fraction /= ranks; }
  // Everything after the weights: cuBLAS, attention, activations, the KV pool, the step staging,
  // the fused path, GEMM tuning when asked. Synchronous; `source` names the weights in the log.
  absl::Status Finish(const std::string& source);
  // Tensor parallel, after Finish: this rank's collectives (not owned; outlive the Impl's steps)
  // and the LM-head output widened to the all-gather's logits_floats. Synchronous.
  absl::Status AttachTensorParallel(cuda_backend::TpHooks* hooks, int64_t logits_floats);
  // A builder validating steps for this backend's limits and KV pool against `vocab_of`'s
  // vocabulary (tensor parallel: the whole model's, not the rank's slice).
  std::unique_ptr<cuda_backend::StepBuilder> NewStepBuilder(const ModelConfig& vocab_of) const;

  // step_runner.cc: CudaModelBackend::Step, Launch, Finish (ModelBackend's contract: at most
  // kMaxLaunched steps launched and unfinished; Step and Forward with none) and Forward.
  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats);
  absl::Status Launch(absl::Span<const BatchRow> rows, StepStats* stats);
  absl::Status Finish(std::vector<SampleResult>* samples);
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits);
  // A step in parts, for a tensor-parallel rank, which stages the batch the group built once.
  // Resets the step's timing, takes `host` (built and validated elsewhere) and stages it.
  absl::Status PrepareBuilt(const cuda_backend::StepHost& host, bool allow_graph, DeviceStep* s);
  // Enqueues the forward pass (and sampling): a bucket's graph, its capture, or eagerly.
  absl::Status Run(const DeviceStep& s, bool sample);
  // Copies the sampled ids back (waits for them) and unpacks them.
  absl::Status CollectSamples(std::vector<SampleResult>* samples);
  void FillStats(absl::Span<const BatchRow> rows, StepStats* stats) const;
  const StepTiming& timing() const { return timing_; }

  // Overwrites every KV page with random values (benchmarks). Synchronous.
  absl::Status FillKvCacheRandom(uint64_t seed);
  // Turns tuned GEMM algorithms on (tuning first if not done yet: synchronous) or off.
  absl::Status SetGemmAutotune(bool enabled);
  void SetCudaGraphs(bool enabled) { options_.cuda_graphs = enabled; }
  void SetSkinnyGemm(bool enabled);
  // On: steps of up to fused_max_tokens tokens, whatever the hidden size (benchmarks force it).
  void SetFusedSmallBatch(bool enabled) {
    options_.fused_small_batch = enabled;
    if (enabled) fused_token_limit_ = options_.fused_max_tokens;
  }
  // backend_load.cc: the deterministic mode's parts (GEMM rows, uniform attention, the builder's
  // tiles). REQUIRES: Finish. FAILED_PRECONDITION under tensor parallelism (the all-reduce's
  // summation order depends on the message size).
  absl::Status SetDeterministic(bool enabled, DeterministicForm form);
  void SetPdl(bool enabled) { options_.pdl = enabled; }
  void SetWorkqueueBalanced(bool on) { kv_->SetWorkqueueBalanced(on); }
  void SetFewRowW8(bool on) { kv_->SetFewRowW8(on); }
  void SetSkipAttentionForTiming(bool skip) { skip_attention_ = skip; }
  void SetFusedPrefetchSteps(int32_t steps);
  void SetFusedGemvBulk(uint32_t projections) { options_.fused_gemv_bulk = projections; }
  void SetFusedPrenormMinTokens(int32_t tokens);

  const ModelConfig& config() const { return config_; }
  const CudaBackendOptions& options() const { return options_; }
  int device() const { return stream_.device(); }
  cudaStream_t stream() const { return stream_.get(); }
  const cuda_backend::DeviceWeights& weights() const { return weights_; }
  const cuda_backend::KvAttention& kv() const { return *kv_; }  // REQUIRES: Finish
  const cuda_backend::FusedPath& fused() const { return fused_; }

 private:
  explicit Impl(const CudaBackendOptions& options) : options_(options) {}
  // backend_load.cc
  absl::Status SetUpFused();
  absl::Status TuneGemms();
  // step_runner.cc: builds `rows` and stages them.
  absl::Status Prepare(absl::Span<const BatchRow> rows, bool need_params, bool allow_graph,
                       DeviceStep* s);
  // The staging upload and the decode plan for the built host step.
  absl::Status Stage(bool allow_graph, DeviceStep* s);
  // The forward pass of `s` over this backend's parts, with the fused path and PDL as the
  // options and the device allow.
  cuda_backend::ForwardPass Pass(const DeviceStep& s);
  bool UseFused(const DeviceStep& s) const;
  bool UsePdl() const { return options_.pdl && fused_.pdl_usable(); }
  bool UsePdlAttention(const DeviceStep& s) const;
  uint32_t GemvBulk(const DeviceStep& s) const;  // the FusedBulk projections of this step
  // The FusedBulk projections one-token fused steps ask for (fused_gemv_bulk, auto resolved for
  // this model); none where sm_90 code is not loaded.
  uint32_t BulkProjections() const;
  bool UsePrenorm(const DeviceStep& s) const;  // fused_prenorm_min_tokens
  int32_t PrenormMinTokens() const;            // the option, auto resolved for the weights
  // Bits of the graph key for what the fused path, PDL and GEMM tuning bake into a capture.
  uint64_t FusedSignature(const DeviceStep& s) const;

  // A step's sampling results on their way to the host: the pinned copy they land in, the event
  // after that copy, and what unpacking needs of the step (the staging holds only the latest).
  struct SampledStep {
    int slot = 0;
    int32_t num_sampled = 0;
    std::vector<int32_t> top_logprobs;  // [num_sampled] alternatives to return; -1: no logprob
    StepTiming timing;                  // prep and launch; wait and post once unpacked
  };
  // Enqueues the results copy of the step `host` staged (null: a step without rows) into the next
  // pinned slot and records its event.
  absl::Status EnqueueResults(const cuda_backend::StepHost* host, SampledStep* step);
  // Waits for `step`'s copy and appends its samples; timing_ becomes the step's.
  absl::Status AwaitResults(SampledStep* step, std::vector<SampleResult>* samples);

  cuda_backend::DeviceStream stream_;  // first member: destroyed last, after every buffer
  ModelConfig config_;
  CudaBackendOptions options_;  // the setters above change the per-step choices
  // Steps of at most this many tokens run fused (SetUpFused: fused_max_tokens, or
  // fused_wide_max_tokens for a model wider than fused_max_hidden).
  int32_t fused_token_limit_ = 8;
  cuda_backend::DeviceWeights weights_;
  std::vector<Fp8KvScales> kv_cache_scales_;  // [L] or empty (1.0)
  std::unique_ptr<cuda_backend::Gemm> gemm_;
  std::unique_ptr<cuda_backend::KvAttention> kv_;
  cuda_backend::StepBuffers buffers_;
  cuda_backend::FusedPath fused_;
  cuda_backend::PackedLinear packed_;
  cuda_backend::StepStaging staging_;
  cuda_backend::GraphCache graphs_;
  std::vector<int32_t> buckets_;  // the graph batch buckets (GraphBuckets(max_rows))
  // The device's free bytes once the context was up: what this backend has allocated since is
  // the difference, counted against gpu_memory_limit_bytes.
  int64_t free_at_start_ = 0;
  bool gemms_tuned_ = false;
  StepTiming timing_;                 // of the last step finished (Step, Finish)
  std::deque<SampledStep> launched_;  // launched, unfinished steps, oldest first
  cuda_backend::DeviceEvent results_ready_[cuda_backend::StepBuffers::kHostSlots];
  int next_slot_ = 0;                    // the pinned results slot the next step's copy lands in
  int32_t latest_sampled_ = 0;           // samples of the latest launched step (its feedback range)
  int32_t current_bucket_ = 0;           // the staged step's graph bucket (0: eager)
  bool skip_attention_ = false;          // ForwardFlags::skip_attention (benchmarks)
  cuda_backend::TpHooks* tp_ = nullptr;  // this rank's collectives; null on one GPU. Not owned.
};

}  // namespace pkv
