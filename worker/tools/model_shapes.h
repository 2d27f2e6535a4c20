// The model shapes pkv-make-model can write, as ModelConfigs, and the config.json /
// generation_config.json text for a config (read back by ParseModelConfig / LoadModelConfig).
//
//   tiny       vocab 512, hidden 64, 2 layers, 4 q / 2 kv heads of 16, intermediate 128, context
//              1024, rope_theta 1e4, tied embeddings, bos 510, eos 511 (the tiny tokenizer's
//              specials): the test and demo model.
//   llama3-1b  the Llama-3.2-1B architecture (16 layers, hidden 2048, 32/8 heads of 64, tied,
//              llama3 rope scaling factor 32).
//   llama3-8b  the Llama-3.1-8B architecture (32 layers, hidden 4096, 32/8 heads of 128, untied,
//              llama3 rope scaling factor 8).
// All shapes take bos = vocab - 2 and eos = vocab - 1, where the tiny-style tokenizer puts its
// specials (the real Llama-3 ids 128000/128001 would point at ordinary tokens of that tokenizer).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/model_config.h"

namespace pkv {

// INVALID_ARGUMENT listing the known shapes for an unknown name.
absl::StatusOr<ModelConfig> ModelShapeConfig(std::string_view shape);
std::vector<std::string> ModelShapeNames();

// Hugging Face style config.json for `config` (architectures, model_type, sizes, rope, eos/bos).
std::string ModelConfigToJson(const ModelConfig& config);
// generation_config.json carrying bos/eos.
std::string GenerationConfigToJson(const ModelConfig& config);

}  // namespace pkv
