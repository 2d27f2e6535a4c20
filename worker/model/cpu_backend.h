// The CPU model backend: a float32 Llama-family forward pass over the paged KV cache, the
// runtime's reference and the backend CI runs every worker feature on.
//
// KV storage: per layer, K and V each [num_kv_pages][H_kv][page_size][D]
// (kernels/attention/kv_layout.h), float32 or FP8 codes with per-layer scales (cpu_kv_cache.h). One
// Step() gathers every fed token of the batch into one [T][hidden] activation matrix, so each layer
// streams its weights once:
//   embed -> per layer { RMSNorm -> q/k/v proj (+bias) -> [Qwen3: per-head q/k RMSNorm] -> RoPE
//   -> write K,V of each token to its row's page slot (quantized in FP8 mode) -> paged causal
//   attention (ReferencePrefillAttention[Fp8] over the batch's block table, lengths = start_pos +
//   num_tokens, which covers decode rows too; softmax scale 1/sqrt(D)) -> o_proj (+bias) + residual
//   -> RMSNorm -> down(silu(gate) * up) + residual } -> final RMSNorm (sampled rows' last token
//   only) -> LM head -> sampling (sampler.h).
//
// Invalid batches (a token id outside the vocabulary, too few pages, a page id out of range, a
// position past max_position_embeddings, a sampled row without params) are INVALID_ARGUMENT and
// nothing is written. Scratch buffers grow to the largest batch seen and are then reused, so steady
// decode allocates nothing.
// Thread-safety: not thread-safe (ModelBackend contract: the scheduler thread owns it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/cpu_kv_cache.h"
#include "worker/model/llama_weights.h"
#include "worker/model/model_backend.h"
#include "worker/model/sampler.h"

namespace pkv {

class CpuModelBackend : public ModelBackend {
 public:
  // REQUIRES: CheckLlamaWeightSizes(weights) is OK, page_size > 0, num_kv_pages > 0
  // (Create() checks these and is the way to build one from untrusted sizes).
  // kv: the KV cache's dtype and scales (REQUIRES: scales empty or one per layer, positive).
  CpuModelBackend(LlamaWeights weights, int32_t page_size, int64_t num_kv_pages,
                  const CpuKvCacheOptions& kv = {});

  static absl::StatusOr<std::unique_ptr<CpuModelBackend>> Create(LlamaWeights weights,
                                                                 int32_t page_size,
                                                                 int64_t num_kv_pages,
                                                                 const CpuKvCacheOptions& kv = {});

  const ModelConfig& config() const override { return weights_.config; }
  int32_t page_size() const override { return page_size_; }
  int64_t num_kv_pages() const override { return num_kv_pages_; }
  std::string backend_name() const override { return "cpu"; }
  std::string dtype_name() const override { return "float32"; }
  KvCacheDtype kv_cache_dtype() const override { return kv_.dtype(); }
  // Per-token dot products in a fixed order, attention per query over its own row, sampling
  // keyed per row (tests/unit/model/cpu_batch_invariance_test.cc).
  bool batch_invariant() const override { return true; }
  int64_t kv_bytes() const { return kv_.bytes(); }

  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats) override;
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) override;

 private:
  absl::Status ValidateBatch(absl::Span<const BatchRow> rows, bool need_params) const;
  // Runs the model; leaves the logits of each sampled row in logits_ [num_sampled][vocab].
  void RunBatch(absl::Span<const BatchRow> rows);
  void PrepareBatch(absl::Span<const BatchRow> rows);
  void AttentionBlock(int layer);
  void MlpBlock(int layer);
  void ComputeLogits();

  LlamaWeights weights_;
  int32_t page_size_;
  int64_t num_kv_pages_;
  std::vector<double> inv_freq_;  // [D/2] RoPE inverse frequencies
  CpuKvCache kv_;

  // Per-step batch description (rebuilt by PrepareBatch).
  int64_t num_tokens_ = 0;            // T, fed tokens of the whole batch
  std::vector<int32_t> token_ids_;    // [T]
  std::vector<int32_t> positions_;    // [T]
  std::vector<int32_t> token_page_;   // [T] page holding each token's K/V
  std::vector<int32_t> qo_indptr_;    // [B + 1]
  std::vector<int32_t> page_indptr_;  // [B + 1]
  std::vector<int32_t> page_ids_;     // [page_indptr_[B]]
  std::vector<int32_t> lengths_;      // [B] start_pos + num_tokens
  // [S] index in [0, T) of the last fed token of each sampled row.
  std::vector<int32_t> sampled_token_index_;

  // Activations, grown to the largest batch and reused.
  std::vector<float> x_;         // [T][hidden] residual stream
  std::vector<float> xn_;        // [T][hidden] normed input of a block
  std::vector<float> q_;         // [T][H_q][D]
  std::vector<float> k_;         // [T][H_kv][D]
  std::vector<float> v_;         // [T][H_kv][D]
  std::vector<float> attn_;      // [T][H_q][D]
  std::vector<float> gate_;      // [T][I]
  std::vector<float> up_;        // [T][I]
  std::vector<float> rope_cos_;  // [T][D/2]
  std::vector<float> rope_sin_;  // [T][D/2]
  std::vector<float> last_;      // [S][hidden]
  std::vector<float> logits_;    // [S][V]
  SamplerScratch sampler_scratch_;
};

// Loads <model_dir> (config.json, generation_config.json, safetensors) into a CPU backend with
// num_kv_pages pages of page_size tokens whose KV is stored as kv_dtype (FP8: the checkpoint's
// k_scale/v_scale when it has them, else 1.0; kv_cache_scales.h).
absl::StatusOr<std::unique_ptr<ModelBackend>> LoadCpuBackend(
    const std::string& model_dir, int32_t page_size, int64_t num_kv_pages,
    KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

}  // namespace pkv
