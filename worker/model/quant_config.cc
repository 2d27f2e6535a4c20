#include "worker/model/quant_config.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv {
namespace {

constexpr std::string_view kCtx = "config.json quantization_config";
constexpr size_t kMaxIgnorePatternBytes = 256;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// "config.json quantization_config.<field> = <value>: <why>"
absl::Status Unsupported(std::string_view field, std::string_view value, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(kCtx), ".", Sv(field), " = ", Sv(value), ": ", Sv(why)));
}

std::string Quoted(std::string_view s) { return absl::StrCat("'", Sv(s), "'"); }

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// An int field that may also be spelled `alt` (AutoAWQ's w_bit / q_group_size).
absl::StatusOr<int64_t> IntField(const JsonValue& q, std::string_view name, std::string_view alt,
                                 int64_t dflt) {
  if (q.Find(name) == nullptr && !alt.empty() && q.Find(alt) != nullptr) {
    return JsonGetIntOr(q, alt, dflt, kCtx);
  }
  return JsonGetIntOr(q, name, dflt, kCtx);
}

absl::Status ParseNotConverted(const JsonValue& q, std::string_view name, QuantConfig* out) {
  const JsonValue* list = q.Find(name);
  if (list == nullptr || list->is_null()) return absl::OkStatus();
  if (!list->is_array()) return Unsupported(name, "(not a list)", "must be a list of module names");
  for (const JsonValue& item : list->items()) {
    if (!item.is_string()) return Unsupported(name, "(not a string)", "must list module names");
    if (item.str().rfind("re:", 0) == 0) {
      // libstdc++ compiles and matches regexes recursively: bound the pattern so a hostile
      // config cannot exhaust the stack (real ignore patterns are a few dozen characters).
      if (item.str().size() > kMaxIgnorePatternBytes) {
        return Unsupported(name, Quoted(item.str().substr(0, 32) + "..."),
                           absl::StrCat("a regex longer than ", kMaxIgnorePatternBytes,
                                        " characters is not supported"));
      }
      // Validate the regex here so a bad one fails at start-up, not on first use.
      try {
        std::regex re(item.str().substr(3));
      } catch (const std::regex_error&) {
        return Unsupported(name, Quoted(item.str()), "is not a valid regular expression");
      }
    }
    out->not_converted.push_back(item.str());
  }
  return absl::OkStatus();
}

absl::Status ParseGroupSize(const JsonValue& q, std::string_view alt, bool allow_per_row,
                            QuantConfig* out) {
  PKV_ASSIGN_OR_RETURN(int64_t g, IntField(q, "group_size", alt, 128));
  if (g == -1 && allow_per_row) {
    out->group_size = -1;
    return absl::OkStatus();
  }
  if (g <= 0 || g % 8 != 0 || g > (1 << 20)) {
    return Unsupported("group_size", absl::StrCat(g), "must be a positive multiple of 8");
  }
  out->group_size = static_cast<int32_t>(g);
  return absl::OkStatus();
}

absl::Status ParseAwq(const JsonValue& q, QuantConfig* out) {
  out->method = QuantMethod::kAwq;
  PKV_ASSIGN_OR_RETURN(int64_t bits, IntField(q, "bits", "w_bit", 4));
  if (bits != 4) return Unsupported("bits", absl::StrCat(bits), "only 4-bit AWQ is supported");
  PKV_RETURN_IF_ERROR(ParseGroupSize(q, "q_group_size", /*allow_per_row=*/false, out));
  PKV_ASSIGN_OR_RETURN(bool zero_point, JsonGetBoolOr(q, "zero_point", true, kCtx));
  if (!zero_point) {
    return Unsupported("zero_point", "false", "only AWQ with zero points (GEMM) is supported");
  }
  PKV_ASSIGN_OR_RETURN(std::string version, JsonGetStringOr(q, "version", "gemm", kCtx));
  if (Lower(version) != "gemm") {
    return Unsupported("version", Quoted(version),
                       "only the GEMM packing is supported (not gemv, exllama, marlin, ipex)");
  }
  return ParseNotConverted(q, "modules_to_not_convert", out);
}

absl::Status ParseGptq(const JsonValue& q, QuantConfig* out) {
  out->method = QuantMethod::kGptq;
  PKV_ASSIGN_OR_RETURN(int64_t bits, JsonGetIntOr(q, "bits", 4, kCtx));
  if (bits != 4) return Unsupported("bits", absl::StrCat(bits), "only 4-bit GPTQ is supported");
  PKV_RETURN_IF_ERROR(ParseGroupSize(q, "", /*allow_per_row=*/true, out));
  PKV_ASSIGN_OR_RETURN(out->sym, JsonGetBoolOr(q, "sym", true, kCtx));
  PKV_ASSIGN_OR_RETURN(bool desc_act, JsonGetBoolOr(q, "desc_act", false, kCtx));
  if (desc_act) {
    return Unsupported("desc_act", "true",
                       "act-order GPTQ checkpoints are not supported (their quantization groups "
                       "are not contiguous input columns); use a desc_act=false checkpoint");
  }
  PKV_ASSIGN_OR_RETURN(bool lm_head, JsonGetBoolOr(q, "lm_head", false, kCtx));
  if (lm_head) return Unsupported("lm_head", "true", "a quantized lm_head is not supported");
  PKV_ASSIGN_OR_RETURN(std::string format, JsonGetStringOr(q, "format", "gptq", kCtx));
  PKV_ASSIGN_OR_RETURN(format, JsonGetStringOr(q, "checkpoint_format", format, kCtx));
  if (format != "gptq" && format != "gptq_v2") {
    return Unsupported("checkpoint_format", Quoted(format),
                       "only 'gptq' and 'gptq_v2' packing is supported");
  }
  out->gptq_v2 = format == "gptq_v2";
  return absl::OkStatus();
}

// compressed-tensors "weights" / "input_activations" argument objects.
absl::Status ParseFp8Weights(const JsonValue& w, const std::string& f, QuantConfig* out) {
  PKV_ASSIGN_OR_RETURN(int64_t bits, JsonGetIntOr(w, "num_bits", 8, kCtx));
  if (bits != 8) return Unsupported(f + "num_bits", absl::StrCat(bits), "only 8-bit FP8 weights");
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(w, "type", "int", kCtx));
  if (type != "float") {
    return Unsupported(f + "type", Quoted(type), "only float (FP8 e4m3) weights are supported");
  }
  PKV_ASSIGN_OR_RETURN(std::string strategy, JsonGetStringOr(w, "strategy", "tensor", kCtx));
  if (strategy != "channel" && strategy != "tensor") {
    return Unsupported(f + "strategy", Quoted(strategy),
                       "only per-channel and per-tensor FP8 scales are supported");
  }
  out->fp8_per_tensor = strategy == "tensor";
  PKV_ASSIGN_OR_RETURN(bool symmetric, JsonGetBoolOr(w, "symmetric", true, kCtx));
  if (!symmetric) return Unsupported(f + "symmetric", "false", "FP8 weights must be symmetric");
  PKV_ASSIGN_OR_RETURN(bool dynamic, JsonGetBoolOr(w, "dynamic", false, kCtx));
  if (dynamic) return Unsupported(f + "dynamic", "true", "FP8 weights need stored scales");
  return absl::OkStatus();
}

absl::Status ParseFp8Group(const std::string& name, const JsonValue& g, QuantConfig* out) {
  const std::string f = absl::StrCat("config_groups.", name, ".");
  const JsonValue* targets = g.Find("targets");
  bool linear = false;
  if (targets != nullptr && targets->is_array()) {
    for (const JsonValue& t : targets->items()) linear |= t.is_string() && t.str() == "Linear";
  }
  if (!linear) {
    return Unsupported(f + "targets", "(without 'Linear')", "only groups targeting Linear");
  }
  const JsonValue* w = g.Find("weights");
  if (w == nullptr || !w->is_object()) return Unsupported(f + "weights", "null", "must be given");
  PKV_RETURN_IF_ERROR(ParseFp8Weights(*w, f + "weights.", out));
  const JsonValue* act = g.Find("input_activations");
  if (act != nullptr && !act->is_null()) {
    if (!act->is_object()) return Unsupported(f + "input_activations", "?", "must be an object");
    PKV_ASSIGN_OR_RETURN(bool dynamic, JsonGetBoolOr(*act, "dynamic", false, kCtx));
    if (!dynamic) {
      return Unsupported(f + "input_activations.dynamic", "false",
                         "static activation scales are not supported (dynamic or none)");
    }
  }
  const JsonValue* outs = g.Find("output_activations");
  if (outs != nullptr && !outs->is_null()) {
    return Unsupported(f + "output_activations", "(set)", "output quantization is not supported");
  }
  return absl::OkStatus();
}

absl::Status ParseCompressedTensors(const JsonValue& q, QuantConfig* out) {
  out->method = QuantMethod::kFp8;
  PKV_ASSIGN_OR_RETURN(std::string format, JsonGetStringOr(q, "format", "", kCtx));
  if (format != "float-quantized" && format != "naive-quantized") {
    return Unsupported("format", Quoted(format),
                       "only compressed-tensors float-quantized (FP8) checkpoints are supported");
  }
  PKV_ASSIGN_OR_RETURN(std::string status,
                       JsonGetStringOr(q, "quantization_status", "compressed", kCtx));
  if (status != "compressed") {
    return Unsupported("quantization_status", Quoted(status), "only 'compressed' checkpoints");
  }
  const JsonValue* kv = q.Find("kv_cache_scheme");
  if (kv != nullptr && !kv->is_null()) {
    return Unsupported("kv_cache_scheme", "(set)",
                       "checkpoint KV-cache scales are not supported (the runtime picks its own "
                       "KV cache dtype)");
  }
  const JsonValue* groups = q.Find("config_groups");
  if (groups == nullptr || !groups->is_object() || groups->members().size() != 1) {
    return Unsupported("config_groups", "(not one group)", "exactly one config group is supported");
  }
  const auto& [name, group] = groups->members()[0];
  if (!group.is_object()) return Unsupported("config_groups", name, "must be an object");
  PKV_RETURN_IF_ERROR(ParseFp8Group(name, group, out));
  return ParseNotConverted(q, "ignore", out);
}

bool NameMatches(const QuantConfig& quant, std::string_view module) {
  const std::string m(module);
  for (const std::string& entry : quant.not_converted) {
    if (quant.method == QuantMethod::kAwq) {
      if (m.find(entry) != std::string::npos) return true;  // AutoAWQ: substring match
    } else if (entry.rfind("re:", 0) == 0) {
      // compressed-tensors: re.match, i.e. anchored at the start. The pattern compiled at parse
      // time; std::regex may still throw on a pathological match (error_complexity), which
      // counts as no match (the module's quantized tensors are then expected and missing ones
      // are reported by name).
      try {
        if (std::regex_search(m, std::regex(entry.substr(3)),
                              std::regex_constants::match_continuous)) {
          return true;
        }
      } catch (const std::regex_error&) {
      }
    } else if (entry == m) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view QuantMethodName(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kGptq:
      return "gptq";
    case QuantMethod::kFp8:
      return "fp8";
  }
  return "?";
}

absl::Status ParseQuantizationConfig(const JsonValue& root, QuantConfig* out) {
  *out = QuantConfig{};
  const JsonValue* q = root.Find("quantization_config");
  if (q == nullptr || q->is_null()) return absl::OkStatus();
  if (!q->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(kCtx), ": must be an object"));
  }
  PKV_ASSIGN_OR_RETURN(std::string method, JsonGetStringOr(*q, "quant_method", "", kCtx));
  if (method == "awq") return ParseAwq(*q, out);
  if (method == "gptq") return ParseGptq(*q, out);
  if (method == "compressed-tensors") return ParseCompressedTensors(*q, out);
  return Unsupported("quant_method", Quoted(method),
                     "not supported (supported: awq, gptq, compressed-tensors)");
}

bool IsQuantizedModule(const QuantConfig& quant, std::string_view module) {
  if (!quant.quantized()) return false;
  static constexpr std::string_view kProjections[] = {
      ".self_attn.q_proj", ".self_attn.k_proj", ".self_attn.v_proj", ".self_attn.o_proj",
      ".mlp.gate_proj",    ".mlp.up_proj",      ".mlp.down_proj"};
  bool linear = false;
  if (module.rfind("model.layers.", 0) == 0) {
    for (std::string_view p : kProjections) {
      linear |= module.size() > p.size() && module.substr(module.size() - p.size()) == p;
    }
  }
  if (module == "lm_head") linear = quant.method == QuantMethod::kFp8;
  return linear && !NameMatches(quant, module);
}

}  // namespace pkv
