#include "worker/tools/model_shapes.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/tools/quantize.h"

namespace pkv {
namespace {

ModelConfig Llama3Base() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = 128256;
  c.num_q_heads = 32;
  c.num_kv_heads = 8;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling = RopeScaling{"llama3", 8.0f, 1.0f, 4.0f, 8192};
  c.torch_dtype = "bfloat16";
  return c;
}

void SetTokenizerSpecials(ModelConfig* c) {
  c->bos_token_id = c->vocab_size - 2;
  c->eos_token_ids = {c->vocab_size - 1};
}

// Shortest decimal that reads back as the same float (1e-05, not 9.99999975e-06).
std::string FloatJson(float v) {
  for (int precision = 6; precision < 9; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtof(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.9g", v);
}

std::string TokenIdsJson(const std::vector<int32_t>& ids) {
  if (ids.size() == 1) return absl::StrCat(ids[0]);
  return absl::StrCat("[", absl::StrJoin(ids, ", "), "]");
}

std::string RopeScalingJson(const RopeScaling& r) {
  if (r.type.empty()) return "null";
  if (r.type == "linear") {
    return absl::StrCat("{\"rope_type\": \"linear\", \"factor\": ", FloatJson(r.factor), "}");
  }
  return absl::StrCat(
      "{\"rope_type\": \"", r.type, "\", \"factor\": ", FloatJson(r.factor),
      ", \"low_freq_factor\": ", FloatJson(r.low_freq_factor),
      ", \"high_freq_factor\": ", FloatJson(r.high_freq_factor),
      ", \"original_max_position_embeddings\": ", r.original_max_position_embeddings, "}");
}

}  // namespace

std::vector<std::string> ModelShapeNames() { return {"tiny", "llama3-1b", "llama3-8b"}; }

absl::StatusOr<ModelConfig> ModelShapeConfig(std::string_view shape) {
  ModelConfig c;
  if (shape == "tiny") {
    c.architecture = "LlamaForCausalLM";
    c.model_type = "llama";
    c.vocab_size = 512;
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.num_layers = 2;
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 16;
    c.max_position_embeddings = 1024;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.tie_word_embeddings = true;
    c.torch_dtype = "bfloat16";
  } else if (shape == "llama3-1b") {
    c = Llama3Base();
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_layers = 16;
    c.head_dim = 64;
    c.rope_scaling.factor = 32.0f;
    c.tie_word_embeddings = true;
  } else if (shape == "llama3-8b") {
    c = Llama3Base();
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_layers = 32;
    c.head_dim = 128;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown shape '", absl::string_view(shape.data(), shape.size()),
                     "' (known: ", absl::StrJoin(ModelShapeNames(), ", "), ")"));
  }
  SetTokenizerSpecials(&c);
  return c;
}

std::string ModelConfigToJson(const ModelConfig& c) {
  std::string out = "{\n";
  auto field = [&out](absl::string_view key, absl::string_view value) {
    absl::StrAppend(&out, out.size() > 2 ? ",\n" : "", "  \"", key, "\": ", value);
  };
  field("architectures", absl::StrCat("[\"", c.architecture, "\"]"));
  field("model_type", absl::StrCat("\"", c.model_type, "\""));
  field("vocab_size", absl::StrCat(c.vocab_size));
  field("hidden_size", absl::StrCat(c.hidden_size));
  field("intermediate_size", absl::StrCat(c.intermediate_size));
  field("num_hidden_layers", absl::StrCat(c.num_layers));
  field("num_attention_heads", absl::StrCat(c.num_q_heads));
  field("num_key_value_heads", absl::StrCat(c.num_kv_heads));
  field("head_dim", absl::StrCat(c.head_dim));
  field("max_position_embeddings", absl::StrCat(c.max_position_embeddings));
  field("hidden_act", "\"silu\"");
  field("rms_norm_eps", FloatJson(c.rms_norm_eps));
  field("rope_theta", FloatJson(c.rope_theta));
  field("rope_scaling", RopeScalingJson(c.rope_scaling));
  field("attention_bias", c.attention_bias ? "true" : "false");
  field("mlp_bias", "false");
  field("tie_word_embeddings", c.tie_word_embeddings ? "true" : "false");
  field("torch_dtype", absl::StrCat("\"", c.torch_dtype, "\""));
  if (c.bos_token_id >= 0) field("bos_token_id", absl::StrCat(c.bos_token_id));
  if (!c.eos_token_ids.empty()) field("eos_token_id", TokenIdsJson(c.eos_token_ids));
  if (c.quant.quantized()) field("quantization_config", QuantizationConfigJson(c.quant));
  return out + "\n}\n";
}

std::string GenerationConfigToJson(const ModelConfig& c) {
  std::string out = "{\n  \"_from_model_config\": true";
  if (c.bos_token_id >= 0) absl::StrAppend(&out, ",\n  \"bos_token_id\": ", c.bos_token_id);
  if (!c.eos_token_ids.empty()) {
    absl::StrAppend(&out, ",\n  \"eos_token_id\": ", TokenIdsJson(c.eos_token_ids));
  }
  return out + "\n}\n";
}

}  // namespace pkv
