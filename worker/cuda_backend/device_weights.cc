#include "worker/cuda_backend/device_weights.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/quant_pack.h"
#include "worker/cuda_backend/weight_uploader.h"
#include "worker/model/llama_weights.h"

namespace pkv::cuda_backend {
namespace {

constexpr int64_t kArenaAlign = 256;

// One destination region of the arena: the concatenation of `sources`, converted to float32
// (`f32`, address into *dst_f32) or to the compute dtype (address into *dst, or proj->w), or a
// layer projection packed (`packed`: weights at offset, scales at scale_offset).
struct Piece {
  std::vector<std::string> sources;
  bool f32 = false;
  const void** dst = nullptr;
  const float** dst_f32 = nullptr;
  ProjectionWeights* proj = nullptr;
  int64_t offset = 0;
  int64_t bytes = 0;
  PackedLayout packed;  // format kDense unless packed
  int64_t scale_offset = 0;
};
Piece Matrix(std::vector<std::string> sources, const void** dst) {
  return Piece{std::move(sources), false, dst, nullptr};
}
Piece Floats(std::vector<std::string> sources, const float** dst) {
  return Piece{std::move(sources), true, nullptr, dst};
}
Piece Projection(std::vector<std::string> sources, ProjectionWeights* proj) {
  return Piece{std::move(sources), false, nullptr, nullptr, proj};
}
bool Packed(const Piece& p) { return p.packed.format != gpu::GemvWeightFormat::kDense; }
std::string ModuleOf(const std::string& weight_name) {  // "...q_proj.weight" -> "...q_proj"
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}

void AddLayerPieces(const ModelConfig& c, int i, LayerWeights* l, std::vector<Piece>* out) {
  const std::string p = absl::StrCat("model.layers.", i, ".");
  const std::string a = p + "self_attn.", m = p + "mlp.";
  out->push_back(Floats({p + "input_layernorm.weight"}, &l->input_norm));
  out->push_back(
      Projection({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, &l->qkv));
  if (c.attention_bias) {
    out->push_back(Floats({a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"}, &l->qkv_bias));
  }
  out->push_back(Projection({a + "o_proj.weight"}, &l->o));
  if (c.o_proj_bias) out->push_back(Floats({a + "o_proj.bias"}, &l->o_bias));
  if (c.qk_norm) {
    out->push_back(Floats({a + "q_norm.weight"}, &l->q_norm));
    out->push_back(Floats({a + "k_norm.weight"}, &l->k_norm));
  }
  out->push_back(Floats({p + "post_attention_layernorm.weight"}, &l->post_norm));
  out->push_back(Projection({m + "gate_proj.weight", m + "up_proj.weight"}, &l->gate_up));
  out->push_back(Projection({m + "down_proj.weight"}, &l->down));
}

}  // namespace

absl::StatusOr<decode::DType> ChooseComputeDType(const std::string& requested,
                                                 const Checkpoint& checkpoint) {
  if (requested == "bfloat16" || requested == "bf16") return decode::DType::kBFloat16;
  if (requested == "float16" || requested == "fp16") return decode::DType::kFloat16;
  if (requested != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA backend dtype '", requested, "' is not supported; use auto, bfloat16 or float16"));
  }
  PKV_ASSIGN_OR_RETURN(TensorView embed, checkpoint.Get("model.embed_tokens.weight"));
  return embed.dtype() == DType::kF16 ? decode::DType::kFloat16 : decode::DType::kBFloat16;
}

namespace {

using SpecMap = absl::flat_hash_map<std::string, TensorSpec>;

SpecMap SpecsByName(const ModelConfig& config) {
  SpecMap specs;
  for (TensorSpec& t : LlamaTensorSpecs(config)) specs.emplace(t.name, std::move(t));
  return specs;
}

// Whether every source of projection piece `p` is quantized by config.quant: then it is packed
// (PackedLayoutOf); a mix stays dense (the quantized members dequantized on the host).
absl::Status ChoosePacking(const ModelConfig& config, const SpecMap& specs, Piece* p) {
  int64_t n = 0, k = 0;
  bool all_quantized = config.quant.quantized();
  for (const std::string& name : p->sources) {
    const TensorSpec& spec = specs.at(name);
    n += spec.shape[0];
    k = spec.shape[1];
    all_quantized = all_quantized && !QuantizedModuleOf(config, spec).empty();
  }
  p->proj->n = n;
  p->proj->k = k;
  if (!all_quantized) return absl::OkStatus();
  PKV_ASSIGN_OR_RETURN(p->packed, PackedLayoutOf(config.quant, ModuleOf(p->sources[0]),
                                                 static_cast<int>(p->sources.size()), n, k));
  p->proj->format = p->packed.format;
  p->proj->scale_count = p->packed.scale_count;
  return absl::OkStatus();
}

int64_t Align(int64_t at) { return (at + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// The pieces of `config` with their arena offsets; sizes from the tensor specs (a checkpoint was
// validated against them first) and, for packed projections, their packed layouts.
absl::StatusOr<std::vector<Piece>> LayOutPieces(const ModelConfig& config, DeviceWeights* w) {
  const SpecMap specs = SpecsByName(config);
  w->layers.resize(config.num_layers);
  std::vector<Piece> pieces;
  pieces.push_back(Matrix({"model.embed_tokens.weight"}, &w->embed));
  for (int i = 0; i < config.num_layers; ++i) AddLayerPieces(config, i, &w->layers[i], &pieces);
  pieces.push_back(Floats({"model.norm.weight"}, &w->final_norm));
  if (!config.tie_word_embeddings) pieces.push_back(Matrix({"lm_head.weight"}, &w->lm_head));
  int64_t cursor = 0;
  for (Piece& p : pieces) {
    if (p.proj != nullptr) PKV_RETURN_IF_ERROR(ChoosePacking(config, specs, &p));
    int64_t n = 0;
    for (const std::string& name : p.sources) n += specs.at(name).numel();
    p.bytes = Packed(p) ? p.packed.q_bytes : n * (p.f32 ? 4 : 2);
    p.offset = Align(cursor);
    cursor = p.offset + p.bytes;
    if (Packed(p)) {
      p.scale_offset = Align(cursor);
      cursor = p.scale_offset + p.packed.scale_bytes;
      w->step_read_bytes += p.packed.scale_bytes;
      w->dequant_scratch_bytes = std::max(w->dequant_scratch_bytes, n * 2);
    }
    if (p.dst != &w->embed) w->step_read_bytes += p.bytes;
  }
  if (config.tie_word_embeddings) {
    w->step_read_bytes += int64_t{config.vocab_size} * config.hidden_size * 2;
  }
  w->arena_bytes = cursor;
  return pieces;
}

absl::Status AllocateArena(const std::vector<Piece>& pieces, const ModelConfig& config,
                           DeviceWeights* w) {
  PKV_ASSIGN_OR_RETURN(w->arena, DeviceBuffer::Allocate(w->arena_bytes));
  if (w->dequant_scratch_bytes > 0) {
    PKV_ASSIGN_OR_RETURN(w->dequant_scratch, DeviceBuffer::Allocate(w->dequant_scratch_bytes));
  }
  for (const Piece& p : pieces) {
    uint8_t* at = w->arena.bytes_ptr() + p.offset;
    if (p.f32) {
      *p.dst_f32 = reinterpret_cast<const float*>(at);
    } else if (p.proj != nullptr) {
      p.proj->w = at;
      if (Packed(p)) p.proj->scales = w->arena.bytes_ptr() + p.scale_offset;
    } else {
      *p.dst = at;
    }
  }
  if (config.tie_word_embeddings) w->lm_head = w->embed;
  return absl::OkStatus();
}

}  // namespace

namespace {

int64_t RowsOf(const QuantizedLinear& m) {
  return m.method == QuantMethod::kFp8 ? m.fp8.n : m.int4.n;
}
int64_t ColsOf(const QuantizedLinear& m) {
  return m.method == QuantMethod::kFp8 ? m.fp8.k : m.int4.k;
}

// Packs projection piece `p` from its members' canonical matrices and copies it (synchronously)
// into the arena.
absl::Status UploadPacked(const Piece& p, const QuantizedSource& quantized_of, decode::DType dtype,
                          cudaStream_t stream) {
  const std::string first = ModuleOf(p.sources[0]);
  std::vector<QuantizedLinear> members;
  int64_t n = 0;
  for (const std::string& name : p.sources) {
    PKV_ASSIGN_OR_RETURN(QuantizedLinear m, quantized_of(ModuleOf(name)));
    n += RowsOf(m);
    members.push_back(std::move(m));
  }
  if (n != p.proj->n) {
    return absl::InvalidArgumentError(
        absl::StrCat(first, ": the loaded members hold ", n, " rows, the projection ", p.proj->n));
  }
  PKV_ASSIGN_OR_RETURN(PackedHost host,
                       PackProjection(std::move(members), p.proj->k, dtype, first));
  if (static_cast<int64_t>(host.q.size()) != p.bytes ||
      static_cast<int64_t>(host.scales.size()) != p.packed.scale_bytes) {
    return absl::InternalError(absl::StrCat(first, ": packed size differs from its layout"));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<void*>(p.proj->w), host.q.data(),
                                           host.q.size(), cudaMemcpyHostToDevice, stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<void*>(p.proj->scales), host.scales.data(),
                                           host.scales.size(), cudaMemcpyHostToDevice, stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // before `host` goes
  return absl::OkStatus();
}

// A quantized tensor of a dense piece (a fused projection mixing formats, an FP8 lm_head):
// dequantized on the host to the compute dtype and copied synchronously to dst.
absl::Status UploadDequantized(const TensorSpec& spec, const std::string& module,
                               const QuantizedSource& quantized_of, decode::DType dtype,
                               uint8_t* dst, cudaStream_t stream) {
  PKV_ASSIGN_OR_RETURN(QuantizedLinear m, quantized_of(module));
  if (RowsOf(m) != spec.shape[0] || ColsOf(m) != spec.shape[1]) {
    return absl::InvalidArgumentError(absl::StrCat(module, ": loaded ", RowsOf(m), " x ", ColsOf(m),
                                                   ", the weights hold ", spec.shape[0], " x ",
                                                   spec.shape[1]));
  }
  const std::vector<uint16_t> dense = DequantizeToDType(m, dtype);
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, dense.data(), dense.size() * 2, cudaMemcpyHostToDevice, stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// Copies dense tensor `name` (the weights' shape `spec`: spec.numel() elements) to dst, converted
// to float32 or the compute dtype. INVALID_ARGUMENT when its source holds another count.
using DenseSource = std::function<absl::Status(const std::string& name, const TensorSpec& spec,
                                               bool f32, uint8_t* dst)>;

// Everything after the layout, shared by the whole model and a tensor-parallel shard: packed
// projections and quantized members through `quantized_of`, dense tensors through `dense_of`.
absl::StatusOr<DeviceWeights> UploadPieces(const ModelConfig& config,
                                           const QuantizedSource& quantized_of,
                                           const DenseSource& dense_of, decode::DType dtype,
                                           cudaStream_t stream) {
  DeviceWeights w;
  w.dtype = dtype;
  PKV_ASSIGN_OR_RETURN(const std::vector<Piece> pieces, LayOutPieces(config, &w));
  PKV_RETURN_IF_ERROR(AllocateArena(pieces, config, &w));
  const SpecMap specs = SpecsByName(config);
  for (const Piece& p : pieces) {
    if (Packed(p)) {
      PKV_RETURN_IF_ERROR(UploadPacked(p, quantized_of, dtype, stream));
      continue;
    }
    uint8_t* dst = w.arena.bytes_ptr() + p.offset;
    int64_t done = 0;
    for (const std::string& name : p.sources) {
      const TensorSpec& spec = specs.at(name);
      const std::string module = QuantizedModuleOf(config, spec);
      if (!module.empty()) {
        PKV_RETURN_IF_ERROR(
            UploadDequantized(spec, module, quantized_of, dtype, dst + done, stream));
      } else {
        PKV_RETURN_IF_ERROR(dense_of(name, spec, p.f32, dst + done));
      }
      done += spec.numel() * (p.f32 ? 4 : 2);
    }
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return w;
}

}  // namespace

absl::StatusOr<DeviceWeights> UploadWeights(const ModelConfig& config, const Checkpoint& checkpoint,
                                            decode::DType dtype, cudaStream_t stream) {
  PKV_RETURN_IF_ERROR(ValidateLlamaCheckpoint(config, checkpoint));
  const SpecMap specs = SpecsByName(config);
  auto quantized_of = [&](const std::string& module) {
    const TensorSpec& spec = specs.at(module + ".weight");
    return LoadQuantizedLinear(config.quant, checkpoint, module, spec.shape[0], spec.shape[1]);
  };
  Uploader up;
  PKV_RETURN_IF_ERROR(up.Init(stream));
  auto dense_of = [&](const std::string& name, const TensorSpec&, bool f32,
                      uint8_t* dst) -> absl::Status {
    PKV_ASSIGN_OR_RETURN(TensorView v, checkpoint.Get(name));  // shape validated above
    return up.Copy(v, f32, dtype, dst);
  };
  return UploadPieces(config, quantized_of, dense_of, dtype, stream);
}

absl::StatusOr<DeviceWeights> UploadWeightRuns(
    const ModelConfig& config, const Checkpoint& checkpoint,
    const std::function<TensorRuns(const std::string& name)>& runs_of,
    const QuantizedSource& quantized_of, decode::DType dtype, cudaStream_t stream) {
  Uploader up;
  PKV_RETURN_IF_ERROR(up.Init(stream));
  auto dense_of = [&](const std::string& name, const TensorSpec& spec, bool f32,
                      uint8_t* dst) -> absl::Status {
    PKV_ASSIGN_OR_RETURN(TensorView v, checkpoint.Get(name));
    const TensorRuns runs = runs_of(name);
    const int64_t numel = runs.runs * runs.width;
    if (runs.first < 0 || runs.width < 0 || runs.runs < 0 || runs.stride < 0 ||
        (numel > 0 && runs.first + (runs.runs - 1) * runs.stride + runs.width > v.numel())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, ": the shard's slice is outside its ", v.numel(), " elements"));
    }
    if (numel != spec.numel()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": the shard's slice of ",
                                                     numel, " elements does not fill its shape (",
                                                     spec.numel(), ")"));
    }
    return up.CopyRuns(v, runs, f32, dtype, dst);
  };
  return UploadPieces(config, quantized_of, dense_of, dtype, stream);
}

absl::StatusOr<DeviceWeights> RandomDeviceWeights(const ModelConfig& config, decode::DType dtype,
                                                  uint64_t seed, cudaStream_t stream) {
  DeviceWeights w;
  w.dtype = dtype;
  PKV_ASSIGN_OR_RETURN(const std::vector<Piece> pieces, LayOutPieces(config, &w));
  PKV_RETURN_IF_ERROR(AllocateArena(pieces, config, &w));
  uint64_t key = seed;
  for (const Piece& p : pieces) {
    if (Packed(p)) {
      key = key * 6364136223846793005ull + 1442695040888963407ull;
      PKV_RETURN_IF_ERROR(FillRandomPacked(p.packed, p.proj->n, p.proj->k, dtype, key,
                                           const_cast<void*>(p.proj->w),
                                           const_cast<void*>(p.proj->scales), stream));
      continue;
    }
    // Matrices ~ U(+-0.035) (std 0.02, the usual initializer range); norms 1 +- 0.02; biases
    // +-0.02: activations stay finite through every layer, as with a freshly initialised model.
    const bool norm = p.f32 && p.sources[0].find("norm") != std::string::npos;
    const float center = norm ? 1.f : 0.f, half = norm || p.f32 ? 0.02f : 0.035f;
    const int64_t n = p.bytes / (p.f32 ? 4 : 2);
    key = key * 6364136223846793005ull + 1442695040888963407ull;
    PKV_RETURN_IF_ERROR(gpu::LaunchFillRandom(w.arena.bytes_ptr() + p.offset, n, p.f32, dtype, key,
                                              center, half, stream));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return w;
}

}  // namespace pkv::cuda_backend
