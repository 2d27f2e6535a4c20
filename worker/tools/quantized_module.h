// One quantized linear module of a random model, ready to write: its float32 weights generated as
// for a dense model (so a --dtype float32 model of the same seed holds the unquantized source),
// quantized (quantize.h) and packed into the format's tensors (awq.h, gptq.h, quant_linear.h).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "worker/model/llama_weights.h"
#include "worker/model/quant_config.h"
#include "worker/model/safetensors.h"

namespace pkv {

struct QuantizedModuleBytes {
  std::string module;  // e.g. "model.layers.0.self_attn.q_proj"
  // Little-endian tensor bytes by the tensor name's last part: qweight, qzeros, scales, g_idx
  // (AWQ/GPTQ), weight and weight_scale (FP8; weight_scale in `scale_dtype`).
  std::map<std::string, std::vector<uint8_t>> parts;
};

// REQUIRES: quant.quantized(); source is the module's [n][k] ".weight" spec, and
// QuantLinearTensorSpecs accepts its shape.
QuantizedModuleBytes QuantizeRandomModule(const QuantConfig& quant, const std::string& module,
                                          const TensorSpec& source, uint64_t seed,
                                          DType scale_dtype);

}  // namespace pkv
