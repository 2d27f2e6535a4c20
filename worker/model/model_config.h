// A Llama-family model's architecture, read from a Hugging Face `config.json` (Llama 2/3, Qwen2/3,
// Mistral): the fields the runtime needs, validated so a malformed file gives a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/quant_config.h"

namespace pkv {

// Llama-3 style RoPE frequency scaling ("rope_scaling": {"rope_type": "llama3", ...}).
struct RopeScaling {
  std::string type;  // "" (none), "llama3", "linear"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int32_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  // e.g. "LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"
  std::string model_type;    // "llama", "qwen2", "qwen3", "mistral"
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;                 // hidden_size / num_q_heads unless "head_dim" is given
  int32_t max_position_embeddings = 0;  // the longest context the runtime admits (see below)
  // Sliding-window attention is not implemented: a window narrower than max_position_embeddings
  // (Mistral v0.1: 4096 of 32768) clamps max_position_embeddings to the window, so every context
  // the runtime admits fits inside the window and full attention is exact. 0 = no window.
  int32_t sliding_window = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2: on by default)
  bool o_proj_bias = false;  // o_proj carries a bias too (Llama/Qwen3 attention_bias; never Qwen2)
  bool qk_norm = false;      // Qwen3: RMSNorm on q and k per head
  std::string torch_dtype;   // "float32", "float16", "bfloat16"
  std::vector<int32_t> eos_token_ids;  // from config.json and generation_config.json
  int32_t bos_token_id = -1;
  QuantConfig quant;  // quantization_config: how the linear projections are stored (none: dense)
};

// Parses config.json text. Accepts model_type llama, qwen2, qwen3 and mistral; rope_scaling types
// absent/"default", "llama3" and "linear" (others, e.g. "yarn", are INVALID_ARGUMENT); rope fields
// may also sit in a "rope_parameters" object (newer transformers). Gives INVALID_ARGUMENT naming
// the field on missing, ill-typed or inconsistent values (e.g. num_attention_heads not a multiple
// of num_key_value_heads, an odd head_dim, a non-positive size, an EOS id outside the vocabulary).
// quantization_config is parsed by ParseQuantizationConfig (quant_config.h).
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text);

// Merges generation_config.json text into `config`: its eos_token_id (int or list) is appended to
// config->eos_token_ids (duplicates dropped), its bos_token_id fills a missing one.
absl::Status ApplyGenerationConfig(const std::string& json_text, ModelConfig* config);

// Loads <dir>/config.json and, when present, <dir>/generation_config.json (EOS ids).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace pkv
