// The `quantization_config` object of a Hugging Face config.json: which quantized weight format a
// checkpoint uses. Supported (everything else is INVALID_ARGUMENT naming the field and value):
//   AWQ   {"quant_method": "awq", "bits": 4, "group_size": G, "zero_point": true,
//          "version": "gemm", "modules_to_not_convert": [...] | null}  (AutoAWQ / transformers;
//          "w_bit" / "q_group_size" accepted as AutoAWQ's older spellings).
//   GPTQ  {"quant_method": "gptq", "bits": 4, "group_size": G | -1, "sym": bool,
//          "desc_act": false, "checkpoint_format": "gptq" | "gptq_v2"}  (AutoGPTQ / GPTQModel /
//          optimum). desc_act true (act-order) is refused: its groups are not contiguous runs of
//          input columns, which the canonical Int4GroupMatrix and the kernels need.
//   FP8   {"quant_method": "compressed-tensors", "format": "float-quantized" | "naive-quantized",
//          "config_groups": {"<one group>": {"targets": ["Linear"], "weights": {"num_bits": 8,
//          "type": "float", "strategy": "channel" | "tensor", "symmetric": true,
//          "dynamic": false}, "input_activations": null | {..., "dynamic": true}}},
//          "ignore": ["lm_head", "re:<regex>", ...]}  (llm-compressor), weights float8_e4m3fn.
// G is a multiple of 8 (128 in practice) that must divide each quantized matrix's input size.
// Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/json.h"

namespace pkv {

enum class QuantMethod { kNone, kAwq, kGptq, kFp8 };

struct QuantConfig {
  QuantMethod method = QuantMethod::kNone;
  // AWQ/GPTQ: input columns sharing one scale and zero point; -1 (GPTQ only) = the whole row.
  int32_t group_size = 0;
  bool sym = false;             // GPTQ: symmetric (every zero point 8)
  bool gptq_v2 = false;         // GPTQ: zero points stored as is (v1 stores zero - 1)
  bool fp8_per_tensor = false;  // FP8: one scale per tensor (else one per output channel)
  // Modules left dense: AWQ modules_to_not_convert (substrings of module names), compressed-tensors
  // ignore (exact module names, or "re:" + a regex matched from the start of the name).
  std::vector<std::string> not_converted;

  bool int4() const { return method == QuantMethod::kAwq || method == QuantMethod::kGptq; }
  bool quantized() const { return method != QuantMethod::kNone; }
};

// "none", "awq", "gptq", "fp8" (for messages and the config writer).
std::string_view QuantMethodName(QuantMethod method);

// Reads root["quantization_config"] (absent or null: method kNone) into *out.
absl::Status ParseQuantizationConfig(const JsonValue& root, QuantConfig* out);

// Whether `module` (a tensor name without ".weight", e.g. "model.layers.3.mlp.down_proj" or
// "lm_head") is one the checkpoint's format quantizes: one of the seven linear projections of a
// layer, or lm_head for FP8 (compressed-tensors quantizes every Linear), unless not_converted
// names it. GPTQ and AWQ never quantize lm_head.
bool IsQuantizedModule(const QuantConfig& quant, std::string_view module);

// The group size of a k-column matrix (-1 resolves to k).
inline int64_t Int4GroupOf(const QuantConfig& quant, int64_t k) {
  return quant.group_size < 0 ? k : quant.group_size;
}

}  // namespace pkv
