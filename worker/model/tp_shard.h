// Megatron-style tensor-parallel sharding of a Llama-family model: which slice of every tensor
// rank r of a group of tp ranks owns, the checks that a model can be split tp ways, and loading a
// rank's slices straight from the checkpoint's raw bytes.
//
// Layout (rank r of tp; H = heads, D = head_dim, I = intermediate_size, V = vocab_size):
//   column-parallel (rows of the [out][in] matrix split, output features local):
//     q_proj rows [r*H_q/tp*D, (r+1)*H_q/tp*D), k_proj/v_proj rows of H_kv/tp heads (+ biases),
//     gate_proj/up_proj rows [r*I/tp, (r+1)*I/tp);
//   row-parallel (columns split, input features local; the partial outputs are all-reduced):
//     o_proj columns of the rank's q heads, down_proj columns [r*I/tp, (r+1)*I/tp);
//   vocab-parallel: embed_tokens and lm_head rows [r*C, min(V, (r+1)*C)), C = ceil(V/tp)
//     (a tied LM head is the same slice of the embedding);
//   replicated: every norm weight, q/k norms (per head, so shard-independent) and the o_proj bias
//     (added once, after the all-reduce).
// Quantized checkpoints split the same way: a rank loads a quantized module and cuts its rows or
// columns out of the canonical matrix (LoadQuantizedShard; 4-bit column splits must fall on group
// boundaries, which ValidateTensorParallel checks for o_proj and down_proj); a CPU rank
// dequantizes the slice, a CUDA rank packs it for its kernels (worker/cuda_backend/quant_pack.h).
// The query heads of a rank are exactly the ones that share its KV heads (head h uses KV head
// h / (H_q / H_kv)), so attention needs no communication and each rank keeps only its KV heads.
//
// A rank's weights are a LlamaWeights whose config is ShardConfig(): the full config with H_q,
// H_kv, I and V replaced by the rank's local counts, so LlamaTensorSpecs/CheckLlamaWeightSizes
// describe and check a shard exactly as they do a whole model.
// Thread-safety: pure functions; loading reads an immutable Checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/checkpoint.h"
#include "worker/model/llama_weights.h"
#include "worker/model/model_config.h"
#include "worker/model/quant_linear.h"

namespace pkv {

// Ranks a worker may split one model over (threads on the CPU, GPUs with NCCL).
inline constexpr int kMaxTensorParallel = 64;

// OK when `config` can be split tp ways; otherwise INVALID_ARGUMENT naming the field that does not
// divide and the tp values that would (e.g. "--tp 4 does not divide num_key_value_heads 2: each
// rank must own whole KV heads; valid --tp for this model: 1, 2"), including a 4-bit model whose
// o_proj or down_proj input columns per rank are not a multiple of the quantization group.
absl::Status ValidateTensorParallel(const ModelConfig& config, int tp);

// Rank r's vocabulary rows [begin, end). REQUIRES: ValidateTensorParallel(config, tp) is OK.
struct VocabShard {
  int32_t begin = 0;
  int32_t end = 0;
  int32_t chunk = 0;  // ceil(V / tp): every rank's padded slice length in the logits all-gather
};
VocabShard VocabShardOf(int32_t vocab_size, int tp, int rank);

// The config of rank r's shard (local H_q, H_kv, I, V). REQUIRES: ValidateTensorParallel OK.
ModelConfig ShardConfig(const ModelConfig& full, int tp, int rank);

// One tensor of a rank's shard: its name and full shape in the checkpoint, and the slice the rank
// owns along split_dim (-1: the whole tensor).
struct TensorShardSpec {
  std::string name;
  std::vector<int64_t> full_shape;
  int split_dim = -1;  // -1 replicated, 0 rows, 1 columns
  int64_t begin = 0;   // slice along split_dim, [begin, end)
  int64_t end = 0;
};

// Every tensor of rank r's shard, in LlamaTensorSlots(ShardConfig(...)) order.
// REQUIRES: ValidateTensorParallel(full, tp) is OK, 0 <= rank < tp.
std::vector<TensorShardSpec> TensorShardSpecs(const ModelConfig& full, int tp, int rank);

// The rank's slice `spec` of quantized linear `module` (its whole matrix is spec.full_shape) in
// canonical form: the one shard rule of quantized tensors, which the CPU ranks dequantize and the
// CUDA ranks repack for their kernels. Loads the module whole, then cuts rows (column-parallel
// q/k/v/gate/up: output features) or columns (row-parallel o/down: input features, on whole
// 4-bit groups with their scales and zero points; FP8 scales are per row or per tensor, so a
// column slice keeps them). INVALID_ARGUMENT from the loader, or for a 4-bit column slice off the
// group boundaries (ValidateTensorParallel refuses such a tp first).
absl::StatusOr<QuantizedLinear> LoadQuantizedShard(const QuantConfig& quant,
                                                   const Checkpoint& checkpoint,
                                                   const std::string& module,
                                                   const TensorShardSpec& spec);

// Reads rank r's slices of every tensor from the checkpoint and converts them to float32: a
// row slice is one contiguous byte range, a column slice one range per row, so a rank touches
// (maps in) about 1/tp of each split tensor. Validates tp and the full checkpoint shapes first.
absl::StatusOr<LlamaWeights> LoadLlamaShardF32(const ModelConfig& full,
                                               const Checkpoint& checkpoint, int tp, int rank);

// The same shard cut from weights already in memory (random test models, benchmarks).
absl::StatusOr<LlamaWeights> ShardLlamaWeights(const LlamaWeights& full, int tp, int rank);

}  // namespace pkv
