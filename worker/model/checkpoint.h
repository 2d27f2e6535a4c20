// A model directory's tensors by name, as views of their raw bytes and dtype: the layer every
// backend shares. The CPU backend converts these views to float32 (llama_weights.h); a CUDA
// backend can upload bf16/fp16 bytes as they are.
//
// Layout handled: <dir>/model.safetensors.index.json ({"weight_map": {name: shard file}}) naming
// shards in the same directory, else a single <dir>/model.safetensors.
// Thread-safety: immutable after Open(); views stay valid while the Checkpoint lives (the files
// are mapped read-only, so the OS pages bytes in on first touch and can drop them again).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/model/safetensors.h"

namespace pkv {

struct TensorView {
  const SafetensorsTensorInfo* info = nullptr;  // name, dtype, shape; owned by the Checkpoint
  absl::Span<const uint8_t> bytes;              // [info->numel * DTypeSize(info->dtype)]

  DType dtype() const { return info->dtype; }
  const std::vector<int64_t>& shape() const { return info->shape; }
  int64_t numel() const { return info->numel; }
};

class Checkpoint {
 public:
  // NOT_FOUND when the directory has neither an index nor model.safetensors; INVALID_ARGUMENT for a
  // malformed index (bad JSON, a shard name with '/', a tensor missing from its shard) or shard.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& model_dir);

  // INVALID_ARGUMENT "checkpoint has no tensor '<name>'" when absent.
  absl::StatusOr<TensorView> Get(std::string_view name) const;
  bool Contains(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> TensorNames() const;
  int num_files() const { return static_cast<int>(files_.size()); }

 private:
  Checkpoint() = default;
  absl::Status OpenSharded(const std::string& model_dir, const std::string& index_text);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  absl::flat_hash_map<std::string, TensorView> tensors_;
};

}  // namespace pkv
