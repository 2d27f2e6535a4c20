// One rank of the tensor-parallel CPU forward pass (tp_cpu_backend.h runs tp of them in lockstep):
// the rank's weight shard (tp_shard.h), its KV heads of every page, its activations, and the
// collectives that join the ranks (communicator.h).
//
// Per step, on every rank, for the batch the backend prepared once (TpStepBatch):
//   embed: rows of the rank's vocabulary slice, zeros for other tokens -> AllReduceSum = the
//     embedding (exactly: one rank contributes each row);
//   per layer { RMSNorm (replicated residual) -> column-parallel q/k/v of the rank's heads
//     (+ bias, q/k norm, RoPE) -> write K/V of the rank's KV heads into the shared page ids
//     (float32 or FP8 codes: cpu_kv_cache.h) ->
//     paged attention of the rank's query heads -> row-parallel o_proj partial ->
//     AllReduceSum -> + o_bias + residual;
//     RMSNorm -> column-parallel gate/up -> SiLU*mul -> row-parallel down partial ->
//     AllReduceSum -> + residual }
//   -> final RMSNorm of the sampled tokens -> logits of the rank's vocabulary slice ->
//   AllGather -> the full [S][V] logits (rank 0 writes them out).
// That is 2 all-reduces per layer plus one for the embedding and one all-gather per step. The
// residual stream is the same bits on every rank after each all-reduce, so the ranks never drift.
//
// Thread-safety: not thread-safe; owned by the backend, run on its rank's thread during a step.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/model/cpu_kv_cache.h"
#include "worker/model/llama_weights.h"
#include "worker/model/model_config.h"
#include "worker/model/tp_shard.h"
#include "worker/parallel/communicator.h"

namespace pkv {

// The batch of one step, built once by the backend and read by every rank.
struct TpStepBatch {
  int64_t num_tokens = 0;              // T, fed tokens of the whole batch
  std::vector<int32_t> token_ids;      // [T]
  std::vector<int32_t> positions;      // [T]
  std::vector<int32_t> token_page;     // [T] page holding each token's K/V
  std::vector<int32_t> qo_indptr;      // [B + 1]
  std::vector<int32_t> page_indptr;    // [B + 1]
  std::vector<int32_t> page_ids;       // [page_indptr[B]]
  std::vector<int32_t> lengths;        // [B] start_pos + num_tokens
  std::vector<int32_t> sampled_token;  // [S] index in [0, T) of each sampled row's last token
  std::vector<float> rope_cos;         // [T][D/2]
  std::vector<float> rope_sin;         // [T][D/2]
};

class TpRank {
 public:
  // REQUIRES: CheckLlamaWeightSizes(shard) OK, shard.config == ShardConfig(full, tp, rank) with
  // tp = comm->world_size(), rank = comm->rank(); page_size, num_kv_pages > 0. comm not owned.
  // kv: the KV cache's dtype and per-layer scales (the same on every rank: a layer's scale covers
  // all of its heads). REQUIRES: CheckCpuKvCacheOptions(kv, layers) OK.
  TpRank(const ModelConfig& full, LlamaWeights shard, int32_t page_size, int64_t num_kv_pages,
         Communicator* comm, const CpuKvCacheOptions& kv = {});

  // Runs the step. logits: [S][V] full-vocabulary logits of the sampled tokens, written when
  // non-null (rank 0 passes its buffer, the others nullptr).
  absl::Status Forward(const TpStepBatch& batch, std::vector<float>* logits);

  // Seconds this rank spent inside collectives during the last Forward (waiting for the slowest
  // rank included), and how many it ran.
  double last_comm_seconds() const { return comm_seconds_; }
  int32_t last_num_collectives() const { return num_collectives_; }
  int64_t weight_bytes() const;
  int64_t kv_bytes() const;

 private:
  absl::Status AllReduce(float* data, int64_t count);
  absl::Status Embed(const TpStepBatch& b);
  absl::Status AttentionBlock(int layer, const TpStepBatch& b);
  absl::Status MlpBlock(int layer, const TpStepBatch& b);
  absl::Status Logits(const TpStepBatch& b, std::vector<float>* logits);

  const ModelConfig full_;
  const LlamaWeights w_;  // the shard; w_.config holds the local head, intermediate, vocab counts
  const VocabShard vocab_;
  const int32_t page_size_;
  const int64_t num_kv_pages_;
  Communicator* const comm_;
  CpuKvCache kv_;  // this rank's H_kv/tp heads of every page

  // Activations, grown to the largest batch and reused.
  std::vector<float> x_;       // [T][hidden] residual stream (identical on every rank)
  std::vector<float> xn_;      // [T][hidden] normed block input
  std::vector<float> delta_;   // [T][hidden] row-parallel partial output, then its all-reduce
  std::vector<float> q_;       // [T][H_q/tp][D]
  std::vector<float> k_;       // [T][H_kv/tp][D]
  std::vector<float> v_;       // [T][H_kv/tp][D]
  std::vector<float> attn_;    // [T][H_q/tp][D]
  std::vector<float> gate_;    // [T][I/tp]
  std::vector<float> up_;      // [T][I/tp]
  std::vector<float> last_;    // [S][hidden]
  std::vector<float> local_;   // [S][V/tp rows of this rank]
  std::vector<float> send_;    // [S][chunk] this rank's logits, padded to the common chunk
  std::vector<float> gather_;  // [tp][S][chunk]

  double comm_seconds_ = 0;
  int32_t num_collectives_ = 0;
};

}  // namespace pkv
