#include "worker/model/quant_weights.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/llama_weights.h"

namespace pkv {

std::string_view LinearProjectionName(LinearProjection p) {
  switch (p) {
    case LinearProjection::kQ:
      return "self_attn.q_proj";
    case LinearProjection::kK:
      return "self_attn.k_proj";
    case LinearProjection::kV:
      return "self_attn.v_proj";
    case LinearProjection::kO:
      return "self_attn.o_proj";
    case LinearProjection::kGate:
      return "mlp.gate_proj";
    case LinearProjection::kUp:
      return "mlp.up_proj";
    case LinearProjection::kDown:
      return "mlp.down_proj";
  }
  return "?";
}

absl::StatusOr<QuantizedModelLinears> LoadQuantizedLinears(const ModelConfig& config,
                                                           const Checkpoint& checkpoint) {
  if (!config.quant.quantized()) {
    return absl::InvalidArgumentError("config.json has no quantization_config");
  }
  PKV_RETURN_IF_ERROR(ValidateLlamaCheckpoint(config, checkpoint));
  absl::flat_hash_map<std::string, TensorSpec> specs;
  for (TensorSpec& spec : LlamaTensorSpecs(config)) specs.emplace(spec.name, std::move(spec));
  // Loads `module` when config.quant quantizes it; leaves *out empty when it is stored dense.
  auto load = [&](const std::string& module, std::optional<QuantizedLinear>* out) -> absl::Status {
    auto it = specs.find(module + ".weight");
    if (it == specs.end() || QuantizedModuleOf(config, it->second).empty()) return absl::OkStatus();
    const std::vector<int64_t>& shape = it->second.shape;
    PKV_ASSIGN_OR_RETURN(QuantizedLinear linear,
                         LoadQuantizedLinear(config.quant, checkpoint, module, shape[0], shape[1]));
    *out = std::move(linear);
    return absl::OkStatus();
  };
  QuantizedModelLinears out;
  out.layers.resize(config.num_layers);
  for (int layer = 0; layer < config.num_layers; ++layer) {
    for (int p = 0; p < kNumLinearProjections; ++p) {
      const std::string_view name = LinearProjectionName(static_cast<LinearProjection>(p));
      PKV_RETURN_IF_ERROR(load(
          absl::StrCat("model.layers.", layer, ".", absl::string_view(name.data(), name.size())),
          &out.layers[layer].proj[p]));
    }
  }
  PKV_RETURN_IF_ERROR(load("lm_head", &out.lm_head));
  return out;
}

}  // namespace pkv
