// Writes a Llama-family model directory with random weights: config.json,
// generation_config.json and model.safetensors, or model-0000i-of-0000N.safetensors shards with
// model.safetensors.index.json when the weights exceed one shard. Tensors are generated and written
// in chunks, so an 8B model needs a few MB of RAM, not 16 GB.
//
// Values are a pure function of (seed, tensor name, element index), independent of dtype, shard
// layout and write order: element i of tensor t is
//   n = IrwinHall4(Mix64(TensorKey(seed, t) + (i + 1) * 0x9E3779B97F4A7C15))   (~N(0, 1), |n|
//   < 3.5) matrices and embeddings: 0.02 * n (the usual initializer_range); biases 0.02 * n; norm
//   weights: 1 + 0.02 * n,
// so activations stay finite over many layers, as with a freshly initialised real model.
// Thread-safety: pure functions; WriteRandomModel touches only files under options.out_dir.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/llama_weights.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"

namespace pkv {

struct RandomModelOptions {
  std::string out_dir;  // created when missing
  ModelConfig config;
  DType dtype = DType::kBF16;
  uint64_t seed = 1;
  int64_t max_shard_bytes = int64_t{2} << 30;  // a tensor larger than this gets a shard alone
  bool progress = false;                       // print progress lines to stderr
};

struct RandomModelResult {
  std::vector<std::string> files;  // every file written, relative to out_dir
  int num_shards = 0;
  int64_t total_tensor_bytes = 0;
};

absl::StatusOr<RandomModelResult> WriteRandomModel(const RandomModelOptions& options);

// The generator behind the weights (see the header comment), exposed so tests can check a written
// file element by element.
uint64_t RandomTensorKey(uint64_t seed, std::string_view tensor_name);
float RandomWeightValue(TensorSpec::Kind kind, uint64_t tensor_key, int64_t index);

// "bfloat16" | "float16" | "float32" -> DType; INVALID_ARGUMENT otherwise.
absl::StatusOr<DType> ParseTorchDtype(std::string_view name);
std::string TorchDtypeName(DType dtype);

}  // namespace pkv
