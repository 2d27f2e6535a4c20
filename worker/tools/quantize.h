// Round-to-nearest quantizers that turn pkv-make-model's float32 weights into the canonical
// quantized matrices, the way the real tools compute scales and zero points (no calibration:
// random weights have nothing to calibrate against), and the quantization_config JSON those tools
// write. Every step is a single float32 operation (std::nearbyint rounds half to even), so the
// independent packer (tests/quant/quant_packer.py) reproduces the bytes exactly.
//
// Per (output row r, group of input columns) with values w:
//   AWQ  (AutoAWQ pseudo_quantize_tensor, zero_point):  s = fp16(max(max(w) - min(w), 1e-5) / 15),
//        z = clamp(-round(min(w) / s), 0, 15)
//   GPTQ (GPTQ Quantizer.find_params, RTN):  lo = min(min(w), 0), hi = max(max(w), 0);
//        sym: hi = max(-lo, hi), lo = -hi when lo < 0; lo = -1, hi = 1 when both are 0;
//        s = fp16((hi - lo) / 15), z = sym ? 8 : clamp(round(-lo / s), 0, 15)
//   both: q = clamp(round(w / s) + z, 0, 15)
//   FP8  (llm-compressor FP8 channel/tensor): s = amax / 448 (1 when amax is 0) rounded to the
//        scale dtype, q = e4m3(w / s) (round to nearest even, saturating).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/model/quant_config.h"
#include "worker/model/quant_matrix.h"
#include "worker/model/safetensors.h"

namespace pkv {

// w [n][k] row-major. REQUIRES: group % 8 == 0, k % group == 0.
Int4GroupMatrix QuantizeAwq(const float* w, int64_t n, int64_t k, int32_t group);
Int4GroupMatrix QuantizeGptq(const float* w, int64_t n, int64_t k, int32_t group, bool sym);
// scale_dtype: F32, F16 or BF16 (the checkpoint dtype of weight_scale).
Fp8Matrix QuantizeFp8(const float* w, int64_t n, int64_t k, bool per_tensor, DType scale_dtype);

// The quantization_config pkv-make-model writes for --quant awq|gptq|fp8 and its options;
// INVALID_ARGUMENT for an unknown method, group or format.
struct QuantFlags {
  std::string method = "none";           // none | awq | gptq | fp8
  int32_t group_size = 128;              // awq, gptq
  bool gptq_sym = true;                  // gptq
  std::string gptq_format = "gptq";      // gptq | gptq_v2
  std::string fp8_strategy = "channel";  // channel | tensor
};
absl::StatusOr<QuantConfig> QuantConfigFromFlags(const QuantFlags& flags);

// The JSON object config.json carries under "quantization_config", shaped as AutoAWQ, AutoGPTQ
// (optimum) and llm-compressor write it. REQUIRES: quant.quantized().
std::string QuantizationConfigJson(const QuantConfig& quant);

}  // namespace pkv
