#include "worker/model/tp_shard.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/model/quant_linear.h"

namespace pkv {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// 4-bit checkpoints: the row-parallel matrices (o_proj, down_proj) split their input columns, and
// a rank must own whole quantization groups (one scale and zero point per group and row).
std::string QuantGroupProblem(const ModelConfig& c, int tp) {
  if (!c.quant.int4() || tp == 1) return "";
  const int64_t o_in = int64_t{c.num_q_heads} * c.head_dim, down_in = c.intermediate_size;
  for (const auto& [name, k] : {std::pair<const char*, int64_t>{"o_proj", o_in},
                                std::pair<const char*, int64_t>{"down_proj", down_in}}) {
    const int64_t group = Int4GroupOf(c.quant, k);
    if (k % tp != 0 || (k / tp) % group != 0) {
      return absl::StrCat("--tp ", tp, " gives each rank ", k / tp, " of ", name, "'s ", k,
                          " input columns, not a multiple of quantization_config.group_size ",
                          group, ": quantized tensors split only on group boundaries");
    }
  }
  return "";
}

// Whether tp splits every sharded dimension of `c` (heads, intermediate) and leaves every rank
// some vocabulary rows; the reason when not.
std::string TpProblem(const ModelConfig& c, int tp) {
  if (c.num_kv_heads % tp != 0) {
    return absl::StrCat("--tp ", tp, " does not divide num_key_value_heads ", c.num_kv_heads,
                        ": each rank must own whole KV heads (and the query heads that share "
                        "them)");
  }
  if (c.num_q_heads % tp != 0) {
    return absl::StrCat("--tp ", tp, " does not divide num_attention_heads ", c.num_q_heads);
  }
  if (c.intermediate_size % tp != 0) {
    return absl::StrCat("--tp ", tp, " does not divide intermediate_size ", c.intermediate_size,
                        ": gate/up rows and down columns are split evenly");
  }
  const std::string group_problem = QuantGroupProblem(c, tp);
  if (!group_problem.empty()) return group_problem;
  if ((tp - 1) * CeilDiv(c.vocab_size, tp) >= c.vocab_size) {
    return absl::StrCat("--tp ", tp, " leaves the last rank without vocabulary rows (vocab_size ",
                        c.vocab_size, ")");
  }
  return "";
}

// Converts the slice `spec` of a tensor stored as `dtype` at `src` (the whole tensor's bytes).
//   out [numel of the slice]
void CopySlice(const TensorShardSpec& spec, DType dtype, const uint8_t* src, float* out) {
  const int64_t es = DTypeSize(dtype);
  int64_t numel = 1;
  for (int64_t d : spec.full_shape) numel *= d;
  if (spec.split_dim < 0) {
    ConvertElementsToFloat32(dtype, src, numel, out);
    return;
  }
  const int64_t width = spec.end - spec.begin;
  if (spec.split_dim == 0) {  // rows: one contiguous range
    const int64_t inner = numel / spec.full_shape[0];
    ConvertElementsToFloat32(dtype, src + spec.begin * inner * es, width * inner, out);
    return;
  }
  // columns of a [rows][cols] matrix: one range per row
  const int64_t rows = spec.full_shape[0], cols = spec.full_shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    ConvertElementsToFloat32(dtype, src + (r * cols + spec.begin) * es, width, out + r * width);
  }
}

// Dequantizes the rank's slice of a quantized module into the slot.
absl::Status LoadQuantizedSlice(const QuantConfig& quant, const Checkpoint& checkpoint,
                                const std::string& module, const TensorShardSpec& spec,
                                const LlamaTensorSlot& slot) {
  PKV_ASSIGN_OR_RETURN(QuantizedLinear linear, LoadQuantizedShard(quant, checkpoint, module, spec));
  slot.dst->resize(static_cast<size_t>(slot.spec.numel()));
  DequantizeLinear(linear, slot.dst->data());
  return absl::OkStatus();
}

absl::Status CheckRank(const ModelConfig& full, int tp, int rank) {
  PKV_RETURN_IF_ERROR(ValidateTensorParallel(full, tp));
  if (rank < 0 || rank >= tp) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in [0, ", tp, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTensorParallel(const ModelConfig& config, int tp) {
  if (tp < 1 || tp > kMaxTensorParallel) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp must be in [1, ", kMaxTensorParallel, "], got ", tp));
  }
  const std::string problem = TpProblem(config, tp);
  if (problem.empty()) return absl::OkStatus();
  std::vector<int> valid;
  for (int t = 1; t <= kMaxTensorParallel && t <= config.num_kv_heads; ++t) {
    if (TpProblem(config, t).empty()) valid.push_back(t);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(problem, "; valid --tp for this model: ", absl::StrJoin(valid, ", ")));
}

VocabShard VocabShardOf(int32_t vocab_size, int tp, int rank) {
  VocabShard s;
  s.chunk = static_cast<int32_t>(CeilDiv(vocab_size, tp));
  s.begin = std::min(vocab_size, rank * s.chunk);
  s.end = std::min(vocab_size, s.begin + s.chunk);
  return s;
}

ModelConfig ShardConfig(const ModelConfig& full, int tp, int rank) {
  ModelConfig c = full;
  c.num_q_heads = full.num_q_heads / tp;
  c.num_kv_heads = full.num_kv_heads / tp;
  c.intermediate_size = full.intermediate_size / tp;
  const VocabShard v = VocabShardOf(full.vocab_size, tp, rank);
  c.vocab_size = v.end - v.begin;
  return c;
}

std::vector<TensorShardSpec> TensorShardSpecs(const ModelConfig& full, int tp, int rank) {
  const std::vector<TensorSpec> whole = LlamaTensorSpecs(full);
  const std::vector<TensorSpec> local = LlamaTensorSpecs(ShardConfig(full, tp, rank));
  PKV_CHECK(whole.size() == local.size());
  std::vector<TensorShardSpec> out;
  out.reserve(whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    PKV_CHECK(whole[i].name == local[i].name && whole[i].shape.size() == local[i].shape.size());
    TensorShardSpec s;
    s.name = whole[i].name;
    s.full_shape = whole[i].shape;
    // The one dimension a shard shrinks (none for replicated tensors) is its split dimension;
    // every split uses chunks of ceil(n / tp), exact for heads and intermediate (tp divides them).
    for (size_t d = 0; d < whole[i].shape.size(); ++d) {
      if (whole[i].shape[d] == local[i].shape[d]) continue;
      PKV_CHECK(s.split_dim < 0);
      s.split_dim = static_cast<int>(d);
      s.begin = rank * CeilDiv(whole[i].shape[d], tp);
      s.end = s.begin + local[i].shape[d];
      PKV_CHECK(s.end <= whole[i].shape[d]);
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<QuantizedLinear> LoadQuantizedShard(const QuantConfig& quant,
                                                   const Checkpoint& checkpoint,
                                                   const std::string& module,
                                                   const TensorShardSpec& spec) {
  PKV_ASSIGN_OR_RETURN(
      QuantizedLinear linear,
      LoadQuantizedLinear(quant, checkpoint, module, spec.full_shape[0], spec.full_shape[1]));
  const bool fp8 = linear.method == QuantMethod::kFp8;
  if (spec.split_dim == 0 && fp8) {
    linear.fp8 = SliceFp8Rows(linear.fp8, spec.begin, spec.end);
  } else if (spec.split_dim == 0) {
    linear.int4 = SliceInt4Rows(linear.int4, spec.begin, spec.end);
  } else if (spec.split_dim == 1 && fp8) {
    linear.fp8 = SliceFp8Columns(linear.fp8, spec.begin, spec.end);
  } else if (spec.split_dim == 1) {
    PKV_ASSIGN_OR_RETURN(linear.int4, SliceInt4Columns(linear.int4, spec.begin, spec.end));
  }
  return linear;
}

absl::StatusOr<LlamaWeights> LoadLlamaShardF32(const ModelConfig& full,
                                               const Checkpoint& checkpoint, int tp, int rank) {
  PKV_RETURN_IF_ERROR(CheckRank(full, tp, rank));
  PKV_RETURN_IF_ERROR(ValidateLlamaCheckpoint(full, checkpoint));
  LlamaWeights w;
  w.config = ShardConfig(full, tp, rank);
  std::vector<LlamaTensorSlot> slots = LlamaTensorSlots(&w);
  const std::vector<TensorShardSpec> specs = TensorShardSpecs(full, tp, rank);
  PKV_CHECK(slots.size() == specs.size());
  const std::vector<TensorSpec> whole = LlamaTensorSpecs(full);
  for (size_t i = 0; i < slots.size(); ++i) {
    const std::string module = QuantizedModuleOf(full, whole[i]);
    if (!module.empty()) {
      PKV_RETURN_IF_ERROR(LoadQuantizedSlice(full.quant, checkpoint, module, specs[i], slots[i]));
      continue;
    }
    PKV_ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(specs[i].name));
    slots[i].dst->resize(static_cast<size_t>(slots[i].spec.numel()));
    CopySlice(specs[i], view.dtype(), view.bytes.data(), slots[i].dst->data());
  }
  return w;
}

absl::StatusOr<LlamaWeights> ShardLlamaWeights(const LlamaWeights& full, int tp, int rank) {
  PKV_RETURN_IF_ERROR(CheckRank(full.config, tp, rank));
  PKV_RETURN_IF_ERROR(CheckLlamaWeightSizes(full));
  // LlamaTensorSlots takes a mutable model because loaders fill it; here it only resizes `layers`
  // to the size CheckLlamaWeightSizes just confirmed (a no-op) and the slots are only read.
  std::vector<LlamaTensorSlot> src = LlamaTensorSlots(const_cast<LlamaWeights*>(&full));
  LlamaWeights w;
  w.config = ShardConfig(full.config, tp, rank);
  std::vector<LlamaTensorSlot> dst = LlamaTensorSlots(&w);
  const std::vector<TensorShardSpec> specs = TensorShardSpecs(full.config, tp, rank);
  PKV_CHECK(src.size() == specs.size() && dst.size() == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    dst[i].dst->resize(static_cast<size_t>(dst[i].spec.numel()));
    CopySlice(specs[i], DType::kF32, reinterpret_cast<const uint8_t*>(src[i].dst->data()),
              dst[i].dst->data());
  }
  return w;
}

}  // namespace pkv
