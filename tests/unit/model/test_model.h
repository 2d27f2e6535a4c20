// Test helpers for the model runtime: tiny configs of each supported family, random in-memory
// weights, and a naive dense forward pass in double precision (no paging, no KV cache, written
// straight from the Hugging Face modeling code) that the CPU backend is checked against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/model/llama_weights.h"
#include "worker/model/model_config.h"

namespace pkv::testing {

// Families: "llama" (GQA 4:2, untied LM head), "llama3" (llama3 rope scaling, tied), "qwen2"
// (q/k/v bias, G = 3), "qwen3" (qk norm, head_dim != hidden / heads, MHA).
ModelConfig TinyConfig(const std::string& family);

// Matrices ~ N(0, scale^2), norm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2); deterministic.
LlamaWeights RandomWeights(const ModelConfig& config, uint32_t seed, float scale = 0.15f);

// The model's inverse RoPE frequencies, computed the way transformers'
// _compute_llama3_parameters / _compute_default_rope_parameters write them.
std::vector<double> DirectRopeFrequencies(const ModelConfig& config);

// Logits [num_positions][vocab] of every position of `tokens` run as one causal sequence.
std::vector<std::vector<double>> DenseForward(const LlamaWeights& w,
                                              const std::vector<int32_t>& tokens);

}  // namespace pkv::testing
