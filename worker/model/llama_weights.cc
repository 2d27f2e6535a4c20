#include "worker/model/llama_weights.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"
#include "worker/model/quant_linear.h"

namespace pkv {
namespace {

using Kind = TensorSpec::Kind;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Slots of a mutable or const LlamaWeights (Vec is std::vector<float> or its const), so loading
// and size checking walk the same list. REQUIRES: w->layers.size() == num_layers.
template <typename Weights, typename Vec>
struct SlotList {
  std::vector<std::pair<TensorSpec, Vec*>> items;
  void Add(std::string name, std::vector<int64_t> shape, Kind kind, Vec* dst) {
    items.emplace_back(TensorSpec{std::move(name), std::move(shape), kind}, dst);
  }
};

template <typename Layer, typename List>
void AddLayerSlots(const ModelConfig& c, int layer, Layer* l, List* out) {
  const int64_t h = c.hidden_size, d = c.head_dim, i = c.intermediate_size;
  const int64_t q = c.num_q_heads * d, kv = c.num_kv_heads * d;
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  out->Add(p + "input_layernorm.weight", {h}, Kind::kNorm, &l->input_norm);
  out->Add(p + "self_attn.q_proj.weight", {q, h}, Kind::kMatrix, &l->q_proj);
  out->Add(p + "self_attn.k_proj.weight", {kv, h}, Kind::kMatrix, &l->k_proj);
  out->Add(p + "self_attn.v_proj.weight", {kv, h}, Kind::kMatrix, &l->v_proj);
  if (c.attention_bias) {
    out->Add(p + "self_attn.q_proj.bias", {q}, Kind::kBias, &l->q_bias);
    out->Add(p + "self_attn.k_proj.bias", {kv}, Kind::kBias, &l->k_bias);
    out->Add(p + "self_attn.v_proj.bias", {kv}, Kind::kBias, &l->v_bias);
  }
  out->Add(p + "self_attn.o_proj.weight", {h, q}, Kind::kMatrix, &l->o_proj);
  if (c.o_proj_bias) out->Add(p + "self_attn.o_proj.bias", {h}, Kind::kBias, &l->o_bias);
  if (c.qk_norm) {
    out->Add(p + "self_attn.q_norm.weight", {d}, Kind::kNorm, &l->q_norm);
    out->Add(p + "self_attn.k_norm.weight", {d}, Kind::kNorm, &l->k_norm);
  }
  out->Add(p + "post_attention_layernorm.weight", {h}, Kind::kNorm, &l->post_norm);
  out->Add(p + "mlp.gate_proj.weight", {i, h}, Kind::kMatrix, &l->gate_proj);
  out->Add(p + "mlp.up_proj.weight", {i, h}, Kind::kMatrix, &l->up_proj);
  out->Add(p + "mlp.down_proj.weight", {h, i}, Kind::kMatrix, &l->down_proj);
}

template <typename Weights, typename Vec>
SlotList<Weights, Vec> CollectSlots(Weights* w) {
  const ModelConfig& c = w->config;
  const int64_t v = c.vocab_size, h = c.hidden_size;
  SlotList<Weights, Vec> out;
  out.Add("model.embed_tokens.weight", {v, h}, Kind::kEmbedding, &w->embed);
  for (int layer = 0; layer < c.num_layers; ++layer) {
    AddLayerSlots(c, layer, &w->layers[layer], &out);
  }
  out.Add("model.norm.weight", {h}, Kind::kNorm, &w->final_norm);
  if (!c.tie_word_embeddings) out.Add("lm_head.weight", {v, h}, Kind::kMatrix, &w->lm_head);
  return out;
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<LlamaTensorSlot> LlamaTensorSlots(LlamaWeights* w) {
  w->layers.resize(w->config.num_layers);
  std::vector<LlamaTensorSlot> out;
  for (auto& [spec, dst] : CollectSlots<LlamaWeights, std::vector<float>>(w).items) {
    out.push_back({std::move(spec), dst});
  }
  return out;
}

std::vector<TensorSpec> LlamaTensorSpecs(const ModelConfig& config) {
  LlamaWeights empty;
  empty.config = config;
  std::vector<TensorSpec> specs;
  for (LlamaTensorSlot& slot : LlamaTensorSlots(&empty)) specs.push_back(std::move(slot.spec));
  return specs;
}

std::string QuantizedModuleOf(const ModelConfig& config, const TensorSpec& spec) {
  constexpr std::string_view kSuffix = ".weight";
  if (spec.kind != Kind::kMatrix || !config.quant.quantized()) return "";
  const std::string module = spec.name.substr(0, spec.name.size() - kSuffix.size());
  return IsQuantizedModule(config.quant, module) ? module : "";
}

absl::Status ValidateLlamaCheckpoint(const ModelConfig& config, const Checkpoint& checkpoint) {
  for (const TensorSpec& spec : LlamaTensorSpecs(config)) {
    const std::string module = QuantizedModuleOf(config, spec);
    if (!module.empty()) {
      PKV_RETURN_IF_ERROR(
          ValidateQuantLinear(config.quant, checkpoint, module, spec.shape[0], spec.shape[1]));
      continue;
    }
    PKV_ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(spec.name));
    if (view.dtype() != DType::kF32 && view.dtype() != DType::kF16 &&
        view.dtype() != DType::kBF16) {
      const std::string_view dtype = DTypeName(view.dtype());
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", spec.name, "' has dtype ", absl::string_view(dtype.data(), dtype.size()),
          ": dense weights must be F32, F16 or BF16 (is config.json's quantization_config "
          "missing?)"));
    }
    if (view.shape() != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", spec.name, "' has shape ",
                                                     ShapeString(view.shape()), ", expected ",
                                                     ShapeString(spec.shape), " from config.json"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLlamaWeightSizes(const LlamaWeights& w) {
  if (static_cast<int>(w.layers.size()) != w.config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("weights have ", w.layers.size(),
                                                   " layers, config says ", w.config.num_layers));
  }
  for (const auto& [spec, vec] :
       CollectSlots<const LlamaWeights, const std::vector<float>>(&w).items) {
    if (static_cast<int64_t>(vec->size()) != spec.numel()) {
      return absl::InvalidArgumentError(absl::StrCat("weight '", spec.name, "' has ", vec->size(),
                                                     " elements, expected ", spec.numel(),
                                                     " for shape ", ShapeString(spec.shape)));
    }
  }
  return absl::OkStatus();
}

void ConvertToFloat32(const TensorView& view, float* out) {
  ConvertElementsToFloat32(view.dtype(), view.bytes.data(), view.numel(), out);
}

void ConvertElementsToFloat32(DType dtype, const uint8_t* src, int64_t n, float* out) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);  // little-endian host
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        Half h;
        std::memcpy(&h.bits, src + 2 * i, 2);
        out[i] = ToFloat(h);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        BFloat16 b;
        std::memcpy(&b.bits, src + 2 * i, 2);
        out[i] = ToFloat(b);
      }
      return;
    case DType::kI32:  // packed words are not values; validation keeps them out of here
      for (int64_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::kF8E4M3:  // without its scale; quantized matrices go through quant_linear.h
      for (int64_t i = 0; i < n; ++i) out[i] = E4M3ToFloat(src[i]);
      return;
  }
}

absl::StatusOr<LlamaWeights> LoadLlamaWeightsF32(const ModelConfig& config,
                                                 const Checkpoint& checkpoint) {
  PKV_RETURN_IF_ERROR(ValidateLlamaCheckpoint(config, checkpoint));
  LlamaWeights w;
  w.config = config;
  for (LlamaTensorSlot& slot : LlamaTensorSlots(&w)) {
    const std::string module = QuantizedModuleOf(config, slot.spec);
    if (!module.empty()) {
      PKV_ASSIGN_OR_RETURN(QuantizedLinear linear,
                           LoadQuantizedLinear(config.quant, checkpoint, module, slot.spec.shape[0],
                                               slot.spec.shape[1]));
      slot.dst->resize(static_cast<size_t>(slot.spec.numel()));
      DequantizeLinear(linear, slot.dst->data());
      continue;
    }
    PKV_ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(slot.spec.name));
    slot.dst->resize(static_cast<size_t>(view.numel()));
    ConvertToFloat32(view, slot.dst->data());
  }
  return w;
}

}  // namespace pkv
