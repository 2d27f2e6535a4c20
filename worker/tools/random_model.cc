#include "worker/tools/random_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"
#include "worker/model/file_util.h"
#include "worker/model/quant_linear.h"
#include "worker/model/sampler.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/quantized_module.h"
#include "worker/tools/safetensors_writer.h"

namespace pkv {
namespace {

constexpr int64_t kChunkElems = int64_t{1} << 20;  // generate and write 1M elements at a time

// One tensor of the written checkpoint: a dense weight, or one part of a quantized module (the
// module's float weights are `source`, quantized and packed once for all of its parts).
struct OutTensor {
  PlannedTensor planned;
  TensorSpec source;
  std::string module;  // "" for a dense tensor
  std::string part;    // the tensor name's last component: qweight, scales, weight_scale, ...
};

struct Shard {
  std::string file_name;
  std::vector<OutTensor> tensors;
  int64_t bytes = 0;
};

absl::StatusOr<std::vector<OutTensor>> PlanTensors(const ModelConfig& c, DType dtype) {
  std::vector<OutTensor> out;
  for (const TensorSpec& spec : LlamaTensorSpecs(c)) {
    const std::string module = QuantizedModuleOf(c, spec);
    if (module.empty()) {
      out.push_back({{spec.name, dtype, spec.shape}, spec, "", ""});
      continue;
    }
    PKV_ASSIGN_OR_RETURN(std::vector<QuantTensorSpec> parts,
                         QuantLinearTensorSpecs(c.quant, module, spec.shape[0], spec.shape[1]));
    for (const QuantTensorSpec& q : parts) {
      const std::string part = q.name.substr(module.size() + 1);
      if (part == "input_scale") continue;  // dynamic activation scales: not stored
      // FP8 scales are stored in the model dtype (as llm-compressor does), 4-bit scales in fp16.
      const DType dt = part == "weight_scale" ? dtype : q.dtypes[0];
      out.push_back({{q.name, dt, q.shapes[0]}, spec, module, part});
    }
  }
  return out;
}

std::vector<Shard> PlanShards(const std::vector<OutTensor>& tensors, int64_t max_shard_bytes) {
  std::vector<Shard> shards(1);
  for (const OutTensor& t : tensors) {
    const int64_t bytes = t.planned.num_bytes();
    if (!shards.back().tensors.empty() && shards.back().bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
    }
    shards.back().tensors.push_back(t);
    shards.back().bytes += bytes;
  }
  const int n = static_cast<int>(shards.size());
  for (int i = 0; i < n; ++i) {
    shards[i].file_name =
        n == 1 ? "model.safetensors" : absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, n);
  }
  return shards;
}

void EncodeChunk(const float* values, int64_t n, DType dtype, std::vector<uint8_t>* out) {
  out->resize(static_cast<size_t>(n * DTypeSize(dtype)));
  uint8_t* p = out->data();
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(p + 4 * i, &values[i], 4);
    } else {
      const uint16_t bits =
          dtype == DType::kBF16 ? ToBFloat16(values[i]).bits : ToHalf(values[i]).bits;
      std::memcpy(p + 2 * i, &bits, 2);
    }
  }
}

struct Progress {
  bool enabled = false;
  int64_t total = 0;
  int64_t done = 0;
  int last_percent = -1;
  void Add(int64_t bytes) {
    done += bytes;
    const int percent = total > 0 ? static_cast<int>(100 * done / total) : 100;
    if (enabled && percent / 5 != last_percent / 5) {
      std::fprintf(stderr, "  %3d%%  %.2f / %.2f GiB\n", percent, done / 1073741824.0,
                   total / 1073741824.0);
      last_percent = percent;
    }
  }
};

absl::Status WriteDense(const RandomModelOptions& opt, const TensorSpec& spec,
                        SafetensorsWriter* writer, Progress* progress) {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  const uint64_t key = RandomTensorKey(opt.seed, spec.name);
  for (int64_t begin = 0; begin < spec.numel(); begin += kChunkElems) {
    const int64_t n = std::min(kChunkElems, spec.numel() - begin);
    values.resize(n);
    for (int64_t i = 0; i < n; ++i) values[i] = RandomWeightValue(spec.kind, key, begin + i);
    EncodeChunk(values.data(), n, opt.dtype, &bytes);
    PKV_RETURN_IF_ERROR(writer->Append(bytes));
    progress->Add(static_cast<int64_t>(bytes.size()));
  }
  return absl::OkStatus();
}

absl::Status WriteShard(const RandomModelOptions& opt, const Shard& shard, Progress* progress) {
  std::vector<PlannedTensor> planned;
  for (const OutTensor& t : shard.tensors) planned.push_back(t.planned);
  if (opt.progress) {
    std::fprintf(stderr, "writing %s (%zu tensors, %.2f GiB)\n", shard.file_name.c_str(),
                 planned.size(), shard.bytes / 1073741824.0);
  }
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                       SafetensorsWriter::Create(JoinPath(opt.out_dir, shard.file_name), planned));
  QuantizedModuleBytes module;  // the module whose parts are being written
  for (const OutTensor& t : shard.tensors) {
    if (t.module.empty()) {
      PKV_RETURN_IF_ERROR(WriteDense(opt, t.source, writer.get(), progress));
      continue;
    }
    if (module.module != t.module) {
      module = QuantizeRandomModule(opt.config.quant, t.module, t.source, opt.seed, opt.dtype);
    }
    const std::vector<uint8_t>& bytes = module.parts.at(t.part);
    PKV_RETURN_IF_ERROR(writer->Append(bytes));
    progress->Add(static_cast<int64_t>(bytes.size()));
  }
  return writer->Finish();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

std::string IndexJson(const std::vector<Shard>& shards, int64_t total_bytes) {
  std::string out =
      absl::StrCat("{\n  \"metadata\": {\"total_size\": ", total_bytes, "},\n  \"weight_map\": {");
  bool first = true;
  for (const Shard& shard : shards) {
    for (const OutTensor& t : shard.tensors) {
      absl::StrAppend(&out, first ? "\n" : ",\n", "    \"", t.planned.name, "\": \"",
                      shard.file_name, "\"");
      first = false;
    }
  }
  return out + "\n  }\n}\n";
}

}  // namespace

uint64_t RandomTensorKey(uint64_t seed, std::string_view tensor_name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name, then mixed with the seed
  for (char ch : tensor_name) h = (h ^ static_cast<uint8_t>(ch)) * 0x100000001b3ull;
  return Mix64(Mix64(seed) ^ h);
}

float RandomWeightValue(TensorSpec::Kind kind, uint64_t tensor_key, int64_t index) {
  const uint64_t r = Mix64(tensor_key + static_cast<uint64_t>(index + 1) * 0x9E3779B97F4A7C15ull);
  // Irwin-Hall: the sum of four 16-bit uniforms has mean 2 and variance 4/12.
  const double sum =
      static_cast<double>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) /
      65536.0;
  const double n = (sum - 2.0) * std::sqrt(3.0);
  if (kind == TensorSpec::Kind::kNorm) return static_cast<float>(1.0 + 0.02 * n);
  return static_cast<float>(0.02 * n);
}

absl::StatusOr<DType> ParseTorchDtype(std::string_view name) {
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16") return DType::kF16;
  if (name == "float32") return DType::kF32;
  return absl::InvalidArgumentError(absl::StrCat("dtype '",
                                                 absl::string_view(name.data(), name.size()),
                                                 "' is not one of bfloat16, float16, float32"));
}

std::string TorchDtypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    case DType::kF32:
      return "float32";
    case DType::kI32:
    case DType::kF8E4M3:
      break;  // not a dense weight dtype
  }
  return "?";
}

absl::StatusOr<RandomModelResult> WriteRandomModel(const RandomModelOptions& opt) {
  std::error_code ec;
  std::filesystem::create_directories(opt.out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(opt.out_dir, ": ", ec.message()));
  ModelConfig config = opt.config;
  config.torch_dtype = TorchDtypeName(opt.dtype);
  RandomModelResult result;
  PKV_RETURN_IF_ERROR(WriteText(JoinPath(opt.out_dir, "config.json"), ModelConfigToJson(config)));
  PKV_RETURN_IF_ERROR(
      WriteText(JoinPath(opt.out_dir, "generation_config.json"), GenerationConfigToJson(config)));
  result.files = {"config.json", "generation_config.json"};
  PKV_ASSIGN_OR_RETURN(std::vector<OutTensor> tensors, PlanTensors(config, opt.dtype));
  const std::vector<Shard> shards = PlanShards(tensors, opt.max_shard_bytes);
  Progress progress;
  progress.enabled = opt.progress;
  for (const Shard& s : shards) progress.total += s.bytes;
  // A stale index from an earlier sharded write would shadow a new single file (and vice versa).
  std::filesystem::remove(JoinPath(opt.out_dir, "model.safetensors.index.json"), ec);
  for (const Shard& shard : shards) {
    PKV_RETURN_IF_ERROR(WriteShard(opt, shard, &progress));
    result.files.push_back(shard.file_name);
  }
  if (shards.size() > 1) {
    PKV_RETURN_IF_ERROR(WriteText(JoinPath(opt.out_dir, "model.safetensors.index.json"),
                                  IndexJson(shards, progress.total)));
    result.files.push_back("model.safetensors.index.json");
  }
  result.num_shards = static_cast<int>(shards.size());
  result.total_tensor_bytes = progress.total;
  return result;
}

}  // namespace pkv
