// The quantized linear layers of a whole checkpoint in canonical form, for backends that run the
// quantized weights directly (the CUDA backend repacks each Int4GroupMatrix / Fp8Matrix into its
// kernels' layout at load time). The CPU backend instead dequantizes through LoadLlamaWeightsF32.
// Thread-safety: pure functions over an immutable Checkpoint.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/checkpoint.h"
#include "worker/model/model_config.h"
#include "worker/model/quant_linear.h"

namespace pkv {

// The seven linear projections of a layer, in this order everywhere.
enum class LinearProjection { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumLinearProjections = 7;
// "self_attn.q_proj", ..., "mlp.down_proj" (the module name within "model.layers.{i}.").
std::string_view LinearProjectionName(LinearProjection p);

struct QuantizedLayerLinears {
  // Indexed by LinearProjection; nullopt: the projection is stored dense (e.g. named by
  // modules_to_not_convert / ignore) and loads as a plain ".weight".
  std::array<std::optional<QuantizedLinear>, kNumLinearProjections> proj;
};

struct QuantizedModelLinears {
  std::vector<QuantizedLayerLinears> layers;  // [num_layers]
  std::optional<QuantizedLinear> lm_head;     // FP8 checkpoints that quantize lm_head
};

// Validates the checkpoint (ValidateLlamaCheckpoint) and loads every quantized projection.
// INVALID_ARGUMENT when config.quant is not quantized.
absl::StatusOr<QuantizedModelLinears> LoadQuantizedLinears(const ModelConfig& config,
                                                           const Checkpoint& checkpoint);

}  // namespace pkv
