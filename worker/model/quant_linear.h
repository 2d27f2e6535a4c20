// One quantized linear layer of a checkpoint: which tensors hold it (names, shapes, dtypes per
// format), their validation, and loading them into the canonical Int4GroupMatrix / Fp8Matrix.
// For module M (e.g. "model.layers.0.self_attn.q_proj") with n outputs and k inputs:
//   AWQ   M.qweight I32 [k][n/8], M.qzeros I32 [k/G][n/8], M.scales F16 [k/G][n]      (awq.h)
//   GPTQ  M.qweight I32 [k/8][n], M.qzeros I32 [k/G][n/8], M.scales F16 [k/G][n],
//         M.g_idx I32 [k] (optional; must be j / G: act-order is refused)             (gptq.h)
//   FP8   M.weight F8_E4M3 [n][k], M.weight_scale F32/BF16/F16 [n][1] (channel) or [1] (tensor;
//         [] and [n] are accepted too), M.input_scale (optional, ignored: activations stay
//         16-bit, as with dynamic activation scales)
// Scales may be F16, BF16 or F32; their values are kept exactly. Extra tensors (a GPTQ bias of
// zeros for a bias-free model, ...) are not read.
// Thread-safety: pure functions over an immutable Checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/checkpoint.h"
#include "worker/model/quant_config.h"
#include "worker/model/quant_matrix.h"

namespace pkv {

struct QuantTensorSpec {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;  // accepted shapes; writers use the first
  std::vector<DType> dtypes;                 // accepted dtypes; writers use the first
  bool required = true;
};

// The tensors of `module`; INVALID_ARGUMENT when the format cannot hold an n x k matrix (4-bit:
// n % 8 != 0 or k not a multiple of the group size).
absl::StatusOr<std::vector<QuantTensorSpec>> QuantLinearTensorSpecs(const QuantConfig& quant,
                                                                    const std::string& module,
                                                                    int64_t n, int64_t k);

// Every required tensor present, every present one with an accepted shape and dtype;
// INVALID_ARGUMENT naming the tensor otherwise.
absl::Status ValidateQuantLinear(const QuantConfig& quant, const Checkpoint& checkpoint,
                                 const std::string& module, int64_t n, int64_t k);

struct QuantizedLinear {
  QuantMethod method = QuantMethod::kNone;  // kAwq/kGptq: `int4` holds the weight; kFp8: `fp8`
  Int4GroupMatrix int4;
  Fp8Matrix fp8;
};

// Validates and loads `module`. REQUIRES: quant.quantized().
absl::StatusOr<QuantizedLinear> LoadQuantizedLinear(const QuantConfig& quant,
                                                    const Checkpoint& checkpoint,
                                                    const std::string& module, int64_t n,
                                                    int64_t k);

// The float32 weight [n][k] (the CPU oracle). REQUIRES: out has n * k slots.
void DequantizeLinear(const QuantizedLinear& linear, float* out);

}  // namespace pkv
