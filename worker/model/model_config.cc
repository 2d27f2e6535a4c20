#include "worker/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "worker/model/file_util.h"

namespace pkv {
namespace {

constexpr std::string_view kConfig = "config.json";
constexpr std::string_view kGenConfig = "generation_config.json";

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status FieldError(std::string_view ctx, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(ctx), ": field '", Sv(field), "' ", Sv(what)));
}

// A required (dflt < 0: missing is an error) or optional int that must be a positive int32.
absl::StatusOr<int32_t> GetPositiveInt32(const JsonValue& obj, std::string_view name, int64_t dflt,
                                         std::string_view ctx) {
  int64_t v = 0;
  if (dflt < 0) {
    PKV_ASSIGN_OR_RETURN(v, JsonGetInt(obj, name, ctx));
  } else {
    PKV_ASSIGN_OR_RETURN(v, JsonGetIntOr(obj, name, dflt, ctx));
  }
  if (v <= 0) return FieldError(ctx, name, absl::StrCat("must be positive, got ", v));
  if (v > std::numeric_limits<int32_t>::max()) {
    return FieldError(ctx, name, absl::StrCat("is too large: ", v));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<float> GetPositiveFloat(const JsonValue& obj, std::string_view name, double dflt,
                                       std::string_view ctx) {
  PKV_ASSIGN_OR_RETURN(double v, JsonGetNumberOr(obj, name, dflt, ctx));
  if (!(v > 0) || v > std::numeric_limits<float>::max()) {
    return FieldError(ctx, name, absl::StrCat("must be a positive finite number, got ", v));
  }
  return static_cast<float>(v);
}

// eos_token_id / bos_token_id: absent or null (nothing), an int, or a list of ints.
absl::Status AppendTokenIds(const JsonValue& obj, std::string_view name, std::string_view ctx,
                            std::vector<int32_t>* out) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  std::vector<const JsonValue*> items;
  if (v->is_array()) {
    for (const JsonValue& item : v->items()) items.push_back(&item);
  } else {
    items.push_back(v);
  }
  for (const JsonValue* item : items) {
    if (!item->is_integer() || item->integer() < 0 ||
        item->integer() > std::numeric_limits<int32_t>::max()) {
      return FieldError(ctx, name, "must be a non-negative integer or a list of them");
    }
    const auto id = static_cast<int32_t>(item->integer());
    if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
  }
  return absl::OkStatus();
}

absl::Status ParseRopeScaling(const JsonValue& obj, std::string_view ctx, RopeScaling* out) {
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(obj, "rope_type", "", ctx));
  if (type.empty()) {
    PKV_ASSIGN_OR_RETURN(type, JsonGetStringOr(obj, "type", "default", ctx));
  }
  if (type == "default") {
    *out = RopeScaling{};
    return absl::OkStatus();
  }
  if (type != "llama3" && type != "linear") {
    return FieldError(ctx, "rope_type",
                      absl::StrCat("'", type,
                                   "' is not supported (supported: default, llama3, "
                                   "linear)"));
  }
  out->type = type;
  if (obj.Find("factor") == nullptr) return FieldError(ctx, "factor", "is missing");
  PKV_ASSIGN_OR_RETURN(out->factor, GetPositiveFloat(obj, "factor", -1, ctx));
  if (type == "linear") return absl::OkStatus();
  PKV_ASSIGN_OR_RETURN(out->low_freq_factor, GetPositiveFloat(obj, "low_freq_factor", 1.0, ctx));
  PKV_ASSIGN_OR_RETURN(out->high_freq_factor, GetPositiveFloat(obj, "high_freq_factor", 4.0, ctx));
  PKV_ASSIGN_OR_RETURN(out->original_max_position_embeddings,
                       GetPositiveInt32(obj, "original_max_position_embeddings", 8192, ctx));
  if (!(out->high_freq_factor > out->low_freq_factor)) {
    return FieldError(ctx, "high_freq_factor", "must be greater than low_freq_factor");
  }
  return absl::OkStatus();
}

// rope_theta and rope_scaling, either top-level (transformers 4.x) or in "rope_parameters".
absl::Status ParseRope(const JsonValue& root, ModelConfig* c) {
  const JsonValue* params = root.Find("rope_parameters");
  if (params != nullptr && !params->is_null()) {
    if (!params->is_object()) return FieldError(kConfig, "rope_parameters", "must be an object");
    const std::string ctx = "config.json rope_parameters";
    PKV_ASSIGN_OR_RETURN(c->rope_theta, GetPositiveFloat(*params, "rope_theta", 10000.0, ctx));
    return ParseRopeScaling(*params, ctx, &c->rope_scaling);
  }
  PKV_ASSIGN_OR_RETURN(c->rope_theta, GetPositiveFloat(root, "rope_theta", 10000.0, kConfig));
  const JsonValue* scaling = root.Find("rope_scaling");
  if (scaling == nullptr || scaling->is_null()) return absl::OkStatus();
  if (!scaling->is_object()) return FieldError(kConfig, "rope_scaling", "must be an object");
  return ParseRopeScaling(*scaling, "config.json rope_scaling", &c->rope_scaling);
}

// model_type, architecture and the per-family defaults (attention bias, qk norm).
absl::Status ParseFamily(const JsonValue& root, ModelConfig* c) {
  PKV_ASSIGN_OR_RETURN(c->model_type, JsonGetStringOr(root, "model_type", "", kConfig));
  static constexpr std::string_view kTypes[] = {"llama", "qwen2", "qwen3", "mistral"};
  if (std::find(std::begin(kTypes), std::end(kTypes), c->model_type) == std::end(kTypes)) {
    if (c->model_type.empty()) return FieldError(kConfig, "model_type", "is missing");
    return FieldError(kConfig, "model_type",
                      absl::StrCat("'", c->model_type,
                                   "' is not supported (supported: llama, qwen2, qwen3, mistral)"));
  }
  const JsonValue* archs = root.Find("architectures");
  if (archs != nullptr && !archs->is_null()) {
    if (!archs->is_array() || (!archs->items().empty() && !archs->items()[0].is_string())) {
      return FieldError(kConfig, "architectures", "must be a list of strings");
    }
    if (!archs->items().empty()) c->architecture = archs->items()[0].str();
  }
  const bool qwen2 = c->model_type == "qwen2";
  PKV_ASSIGN_OR_RETURN(c->attention_bias, JsonGetBoolOr(root, "attention_bias", qwen2, kConfig));
  // HF Mistral has no biases at all; Qwen2 biases q/k/v only; Llama and Qwen3 bias o_proj too.
  if (c->model_type == "mistral") c->attention_bias = false;
  c->o_proj_bias = c->attention_bias && !qwen2;
  c->qk_norm = c->model_type == "qwen3";
  PKV_ASSIGN_OR_RETURN(bool mlp_bias, JsonGetBoolOr(root, "mlp_bias", false, kConfig));
  if (mlp_bias) return FieldError(kConfig, "mlp_bias", "true is not supported");
  PKV_ASSIGN_OR_RETURN(std::string act, JsonGetStringOr(root, "hidden_act", "silu", kConfig));
  if (act != "silu") {
    return FieldError(kConfig, "hidden_act", absl::StrCat("'", act, "' is not supported (silu)"));
  }
  return absl::OkStatus();
}

absl::Status ParseSizes(const JsonValue& root, ModelConfig* c) {
  PKV_ASSIGN_OR_RETURN(c->vocab_size, GetPositiveInt32(root, "vocab_size", -1, kConfig));
  PKV_ASSIGN_OR_RETURN(c->hidden_size, GetPositiveInt32(root, "hidden_size", -1, kConfig));
  PKV_ASSIGN_OR_RETURN(c->intermediate_size,
                       GetPositiveInt32(root, "intermediate_size", -1, kConfig));
  PKV_ASSIGN_OR_RETURN(c->num_layers, GetPositiveInt32(root, "num_hidden_layers", -1, kConfig));
  PKV_ASSIGN_OR_RETURN(c->num_q_heads, GetPositiveInt32(root, "num_attention_heads", -1, kConfig));
  PKV_ASSIGN_OR_RETURN(c->num_kv_heads,
                       GetPositiveInt32(root, "num_key_value_heads", c->num_q_heads, kConfig));
  PKV_ASSIGN_OR_RETURN(c->max_position_embeddings,
                       GetPositiveInt32(root, "max_position_embeddings", -1, kConfig));
  if (c->num_q_heads % c->num_kv_heads != 0) {
    return FieldError(
        kConfig, "num_attention_heads",
        absl::StrCat("(", c->num_q_heads, ") must be a multiple of num_key_value_heads (",
                     c->num_kv_heads, ")"));
  }
  const JsonValue* head_dim = root.Find("head_dim");
  if (head_dim == nullptr || head_dim->is_null()) {
    if (c->hidden_size % c->num_q_heads != 0) {
      return FieldError(kConfig, "hidden_size",
                        absl::StrCat("(", c->hidden_size,
                                     ") must be a multiple of "
                                     "num_attention_heads (",
                                     c->num_q_heads, ") when head_dim is not given"));
    }
    c->head_dim = c->hidden_size / c->num_q_heads;
  } else {
    PKV_ASSIGN_OR_RETURN(c->head_dim, GetPositiveInt32(root, "head_dim", -1, kConfig));
  }
  if (c->head_dim % 2 != 0) {
    return FieldError(kConfig, "head_dim",
                      absl::StrCat("must be even for RoPE, got ", c->head_dim));
  }
  return absl::OkStatus();
}

// Qwen2 carries sliding_window with use_sliding_window false; Mistral v0.2+ has it null.
absl::Status ParseSlidingWindow(const JsonValue& root, ModelConfig* c) {
  PKV_ASSIGN_OR_RETURN(
      bool use, JsonGetBoolOr(root, "use_sliding_window", c->model_type != "qwen2", kConfig));
  const JsonValue* v = root.Find("sliding_window");
  if (!use || v == nullptr || v->is_null()) return absl::OkStatus();
  PKV_ASSIGN_OR_RETURN(int32_t window, GetPositiveInt32(root, "sliding_window", 1, kConfig));
  if (window < c->max_position_embeddings) {
    c->sliding_window = window;
    c->max_position_embeddings = window;  // see ModelConfig::sliding_window
  }
  return absl::OkStatus();
}

absl::Status CheckTokenIds(const ModelConfig& c, std::string_view ctx) {
  for (int32_t id : c.eos_token_ids) {
    if (id >= c.vocab_size) {
      return FieldError(
          ctx, "eos_token_id",
          absl::StrCat(id, " is outside the vocabulary (vocab_size ", c.vocab_size, ")"));
    }
  }
  if (c.bos_token_id >= c.vocab_size) {
    return FieldError(
        ctx, "bos_token_id",
        absl::StrCat(c.bos_token_id, " is outside the vocabulary (vocab_size ", c.vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<JsonValue> ParseObject(const std::string& text, std::string_view ctx) {
  absl::StatusOr<JsonValue> root = ParseJson(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(ctx), ": ", root.status().message()));
  }
  if (!root->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(ctx), ": must be a JSON object"));
  }
  return root;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text) {
  PKV_ASSIGN_OR_RETURN(JsonValue root, ParseObject(json_text, kConfig));
  ModelConfig c;
  PKV_RETURN_IF_ERROR(ParseFamily(root, &c));
  PKV_RETURN_IF_ERROR(ParseSizes(root, &c));
  PKV_RETURN_IF_ERROR(ParseSlidingWindow(root, &c));
  PKV_RETURN_IF_ERROR(ParseRope(root, &c));
  PKV_ASSIGN_OR_RETURN(c.rms_norm_eps, GetPositiveFloat(root, "rms_norm_eps", 1e-6, kConfig));
  PKV_ASSIGN_OR_RETURN(c.tie_word_embeddings,
                       JsonGetBoolOr(root, "tie_word_embeddings", false, kConfig));
  PKV_ASSIGN_OR_RETURN(c.torch_dtype, JsonGetStringOr(root, "torch_dtype", "", kConfig));
  if (c.torch_dtype.empty()) {
    PKV_ASSIGN_OR_RETURN(c.torch_dtype, JsonGetStringOr(root, "dtype", "", kConfig));
  }
  PKV_RETURN_IF_ERROR(AppendTokenIds(root, "eos_token_id", kConfig, &c.eos_token_ids));
  std::vector<int32_t> bos;
  PKV_RETURN_IF_ERROR(AppendTokenIds(root, "bos_token_id", kConfig, &bos));
  if (bos.size() > 1) return FieldError(kConfig, "bos_token_id", "must be a single integer");
  if (!bos.empty()) c.bos_token_id = bos[0];
  PKV_RETURN_IF_ERROR(CheckTokenIds(c, kConfig));
  PKV_RETURN_IF_ERROR(ParseQuantizationConfig(root, &c.quant));
  return c;
}

absl::Status ApplyGenerationConfig(const std::string& json_text, ModelConfig* config) {
  PKV_ASSIGN_OR_RETURN(JsonValue root, ParseObject(json_text, kGenConfig));
  PKV_RETURN_IF_ERROR(AppendTokenIds(root, "eos_token_id", kGenConfig, &config->eos_token_ids));
  std::vector<int32_t> bos;
  PKV_RETURN_IF_ERROR(AppendTokenIds(root, "bos_token_id", kGenConfig, &bos));
  if (bos.size() > 1) return FieldError(kGenConfig, "bos_token_id", "must be a single integer");
  if (!bos.empty() && config->bos_token_id < 0) config->bos_token_id = bos[0];
  return CheckTokenIds(*config, kGenConfig);
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  PKV_ASSIGN_OR_RETURN(std::string text, ReadFileToString(JoinPath(model_dir, "config.json")));
  PKV_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(text));
  absl::StatusOr<std::string> gen = ReadFileToString(JoinPath(model_dir, "generation_config.json"));
  if (absl::IsNotFound(gen.status())) return config;
  if (!gen.ok()) return gen.status();
  PKV_RETURN_IF_ERROR(ApplyGenerationConfig(*gen, &config));
  return config;
}

}  // namespace pkv
