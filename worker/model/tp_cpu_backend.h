// The CPU model backend split over tp ranks with Megatron-style tensor parallelism (tp_shard.h):
// the same ModelBackend contract as CpuModelBackend, the same tokens, and the structure a
// multi-GPU backend has — sharded weights, one KV pool per rank holding that rank's KV heads of
// every page, and collectives after the row-parallel projections — with ranks that are threads
// of this process and an in-process communicator (exact, rank-order sums), so CI checks sharding
// and all-reduce placement without GPUs.
//
// Ranks step in lockstep: Step() validates and prepares the batch once on the calling thread
// (the engine's scheduler thread), fans the forward pass out to the tp rank threads
// (RankThreads; rank 0 runs on the caller), joins them, and samples from rank 0's gathered
// full-vocabulary logits. Page ids come from the scheduler's single page pool: a page id names
// the same tokens on every rank, each rank storing its own heads of them.
//
// Embedding and LM head are vocab-parallel (each rank holds ceil(V/tp) rows; the embedding is
// all-reduced, the logits all-gathered), because for Llama-3 they are 2 x 1 GB of bf16 that a
// memory-bound split should not replicate. Sampling runs once, on the gathered logits.
//
// Results: tp = 1 computes exactly what CpuModelBackend does, bit for bit. tp > 1 splits the
// row-parallel dot products into tp partial sums, so logits differ from tp = 1 by float rounding
// (greedy tokens agree unless two logits tie within it); for a fixed tp, runs are bit-for-bit
// reproducible.
// Thread-safety: not thread-safe (ModelBackend contract); owns its rank threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/llama_weights.h"
#include "worker/model/model_backend.h"
#include "worker/model/sampler.h"
#include "worker/model/tp_rank.h"
#include "worker/parallel/in_process_group.h"
#include "worker/parallel/rank_threads.h"

namespace pkv {

class TpCpuBackend : public ModelBackend {
 public:
  // shards[r] = rank r's weights (LoadLlamaShardF32 / ShardLlamaWeights of `config`), tp =
  // shards.size(). INVALID_ARGUMENT for a config tp cannot split, shards that do not match
  // ShardConfig(config, tp, r), page_size <= 0 or num_kv_pages out of range.
  // kv: the KV cache's dtype and per-layer scales (INVALID_ARGUMENT when they do not fit).
  static absl::StatusOr<std::unique_ptr<TpCpuBackend>> Create(const ModelConfig& config,
                                                              std::vector<LlamaWeights> shards,
                                                              int32_t page_size,
                                                              int64_t num_kv_pages,
                                                              const CpuKvCacheOptions& kv = {});
  // Loads <model_dir> split tp ways: each rank reads only its slices of the checkpoint
  // (LoadLlamaShardF32). INVALID_ARGUMENT (naming the field and the valid --tp values) when the
  // model cannot be split tp ways.
  // kv_dtype: as LoadCpuBackend's (FP8 scales from the checkpoint, else 1.0).
  static absl::StatusOr<std::unique_ptr<TpCpuBackend>> Load(
      const std::string& model_dir, int tp, int32_t page_size, int64_t num_kv_pages,
      KvCacheDtype kv_dtype = KvCacheDtype::kAuto);
  ~TpCpuBackend() override;

  const ModelConfig& config() const override { return config_; }
  int32_t page_size() const override { return page_size_; }
  int64_t num_kv_pages() const override { return num_kv_pages_; }
  std::string backend_name() const override { return "cpu"; }
  std::string dtype_name() const override { return "float32"; }
  KvCacheDtype kv_cache_dtype() const override { return kv_dtype_; }

  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats) override;
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) override;

  int tp() const { return static_cast<int>(ranks_.size()); }
  // Rank 0's time inside collectives in the last step (waits for slower ranks included) and the
  // number of collectives (2 per layer + 2).
  double last_comm_seconds() const { return ranks_[0]->last_comm_seconds(); }
  int32_t last_num_collectives() const { return ranks_[0]->last_num_collectives(); }
  // Weight and KV-pool bytes held by one rank (rank 0; the others hold the same or less).
  int64_t rank_weight_bytes() const { return ranks_[0]->weight_bytes(); }
  int64_t rank_kv_bytes() const { return ranks_[0]->kv_bytes(); }

 private:
  TpCpuBackend(const ModelConfig& config, int32_t page_size, int64_t num_kv_pages,
               KvCacheDtype kv_dtype, std::unique_ptr<InProcessGroup> group);
  void PrepareBatch(absl::Span<const BatchRow> rows);
  absl::Status Run(absl::Span<const BatchRow> rows, bool need_params);

  const ModelConfig config_;
  const int32_t page_size_;
  const int64_t num_kv_pages_;
  const KvCacheDtype kv_dtype_;
  std::vector<double> inv_freq_;  // [D/2] RoPE inverse frequencies
  std::unique_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<TpRank>> ranks_;  // [tp]
  std::unique_ptr<RankThreads> threads_;
  TpStepBatch batch_;          // this step's batch, read by every rank
  std::vector<float> logits_;  // [S][V] written by rank 0
  SamplerScratch sampler_scratch_;
};

// TpCpuBackend::Load as a ModelBackend (the worker's --tp).
absl::StatusOr<std::unique_ptr<ModelBackend>> LoadTpCpuBackend(
    const std::string& model_dir, int tp, int32_t page_size, int64_t num_kv_pages,
    KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

}  // namespace pkv
