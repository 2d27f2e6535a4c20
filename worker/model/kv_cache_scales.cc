#include "worker/model/kv_cache_scales.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/llama_weights.h"

namespace pkv {
namespace {

absl::StatusOr<float> ReadScale(const Checkpoint& checkpoint, const std::string& name) {
  PKV_ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(name));
  if (view.numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has ", view.numel(), " elements; a KV scale is one scalar"));
  }
  if (view.dtype() != DType::kF32 && view.dtype() != DType::kF16 && view.dtype() != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is ", std::string(DTypeName(view.dtype())), "; a KV scale is F32, F16 or BF16"));
  }
  float scale = 0;
  ConvertToFloat32(view, &scale);
  if (!(scale > 0) || !std::isfinite(scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is ", scale, "; a KV scale must be positive and finite"));
  }
  return scale;
}

}  // namespace

absl::StatusOr<std::vector<Fp8KvScales>> LoadKvCacheScales(const Checkpoint& checkpoint,
                                                           int32_t num_layers) {
  auto name = [](int32_t layer, const char* kv) {
    return absl::StrCat("model.layers.", layer, ".self_attn.", kv, "_scale");
  };
  int32_t present = 0;
  for (int32_t i = 0; i < num_layers; ++i) {
    present += checkpoint.Contains(name(i, "k")) + checkpoint.Contains(name(i, "v"));
  }
  if (present == 0) return std::vector<Fp8KvScales>();
  std::vector<Fp8KvScales> scales(num_layers);
  for (int32_t i = 0; i < num_layers; ++i) {
    for (const char* kv : {"k", "v"}) {
      if (!checkpoint.Contains(name(i, kv))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint has KV cache scales for some layers but not ", name(i, kv)));
      }
      PKV_ASSIGN_OR_RETURN(float s, ReadScale(checkpoint, name(i, kv)));
      (kv[0] == 'k' ? scales[i].k : scales[i].v) = s;
    }
  }
  return scales;
}

}  // namespace pkv
