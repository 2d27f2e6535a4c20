// The Llama-family tensor set (Hugging Face names) a ModelConfig implies, shape checks of a
// checkpoint against it, and the float32 copy of the weights the CPU backend computes with.
//
// Names (i = layer):  model.embed_tokens.weight [V][hidden]
//   model.layers.{i}.input_layernorm.weight [hidden]
//   model.layers.{i}.self_attn.q_proj.weight [H_q*D][hidden]   (+ .bias [H_q*D] with
//   attention_bias) model.layers.{i}.self_attn.k_proj.weight [H_kv*D][hidden]  (+ .bias)
//   model.layers.{i}.self_attn.v_proj.weight [H_kv*D][hidden]  (+ .bias)
//   model.layers.{i}.self_attn.o_proj.weight [hidden][H_q*D]   (+ .bias [hidden] with o_proj_bias)
//   model.layers.{i}.self_attn.{q,k}_norm.weight [D]           (qk_norm, Qwen3)
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.layers.{i}.mlp.{gate,up}_proj.weight [I][hidden], mlp.down_proj.weight [hidden][I]
//   model.norm.weight [hidden];  lm_head.weight [V][hidden] unless tie_word_embeddings.
// Matrices are row-major [out][in] as nn.Linear stores them. Extra checkpoint tensors (e.g. an old
// rotary_emb.inv_freq) are ignored. With config.quant set, the matrices its format quantizes
// (IsQuantizedModule) are stored as that format's tensors instead of ".weight" (quant_linear.h);
// the float32 loaders dequantize them, so LlamaWeights is always dense.
// Thread-safety: plain data; LlamaWeights is immutable once loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/checkpoint.h"
#include "worker/model/model_config.h"

namespace pkv {

struct TensorSpec {
  enum class Kind { kMatrix, kEmbedding, kNorm, kBias };
  std::string name;
  std::vector<int64_t> shape;
  Kind kind = Kind::kMatrix;
  int64_t numel() const;
};

// Every tensor the config needs, in a fixed order: embedding, layers 0..L-1, final norm, lm_head.
std::vector<TensorSpec> LlamaTensorSpecs(const ModelConfig& config);

// The module name ("model.layers.0.mlp.up_proj") whose quantized tensors stand in for `spec`, or
// "" when the tensor is stored dense (not a matrix, or not quantized by config.quant).
std::string QuantizedModuleOf(const ModelConfig& config, const TensorSpec& spec);

// Checks that every tensor of LlamaTensorSpecs() is present with the expected shape (a dense one
// as F32, F16 or BF16; a quantized one as its format's tensors, quant_linear.h).
// INVALID_ARGUMENT naming the tensor, the expected and the actual shape or dtype.
absl::Status ValidateLlamaCheckpoint(const ModelConfig& config, const Checkpoint& checkpoint);

struct LlamaLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> q_proj;      // [H_q*D][hidden]
  std::vector<float> k_proj;      // [H_kv*D][hidden]
  std::vector<float> v_proj;      // [H_kv*D][hidden]
  std::vector<float> q_bias;      // [H_q*D]  (empty unless attention_bias)
  std::vector<float> k_bias;      // [H_kv*D] (empty unless attention_bias)
  std::vector<float> v_bias;      // [H_kv*D] (empty unless attention_bias)
  std::vector<float> o_proj;      // [hidden][H_q*D]
  std::vector<float> o_bias;      // [hidden] (empty unless o_proj_bias)
  std::vector<float> q_norm;      // [D] (empty unless qk_norm)
  std::vector<float> k_norm;      // [D] (empty unless qk_norm)
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> gate_proj;   // [I][hidden]
  std::vector<float> up_proj;     // [I][hidden]
  std::vector<float> down_proj;   // [hidden][I]
};

struct LlamaWeights {
  ModelConfig config;
  std::vector<float> embed;               // [V][hidden]
  std::vector<LlamaLayerWeights> layers;  // [num_layers]
  std::vector<float> final_norm;          // [hidden]
  std::vector<float> lm_head;             // [V][hidden]; empty when tie_word_embeddings

  // The LM head matrix [V][hidden]: lm_head, or embed when tied.
  const std::vector<float>& lm_head_matrix() const {
    return config.tie_word_embeddings ? embed : lm_head;
  }
};

// The destination of each tensor of LlamaTensorSpecs(w->config), same order. Resizes w->layers to
// the config's layer count; does not size the float vectors.
struct LlamaTensorSlot {
  TensorSpec spec;
  std::vector<float>* dst = nullptr;
};
std::vector<LlamaTensorSlot> LlamaTensorSlots(LlamaWeights* w);

// Every vector has exactly the size its spec implies (for weights built in memory, e.g. tests).
absl::Status CheckLlamaWeightSizes(const LlamaWeights& w);

// Converts a tensor's F32/F16/BF16 little-endian bytes to float32. REQUIRES: out has numel slots.
void ConvertToFloat32(const TensorView& view, float* out);
// The same for n elements of `dtype` at src (a slice of a tensor: tensor-parallel loading).
//   src [n * DTypeSize(dtype)] bytes, out [n]
void ConvertElementsToFloat32(DType dtype, const uint8_t* src, int64_t n, float* out);

// Validates the checkpoint and copies every tensor to float32 (dequantizing quantized matrices).
absl::StatusOr<LlamaWeights> LoadLlamaWeightsF32(const ModelConfig& config,
                                                 const Checkpoint& checkpoint);

}  // namespace pkv
