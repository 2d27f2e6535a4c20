// Streaming safetensors writer: the tensor list (names, dtypes, shapes) is fixed up front so the
// header can be written first; the tensors' bytes are then appended in that order, in chunks of
// any size, so a multi-gigabyte file never has to be held in memory. The JSON header is padded
// with spaces to a multiple of 8 bytes so every tensor's data starts 8-byte aligned.
// Thread-safety: not thread-safe; one writer per file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/model/safetensors.h"

namespace pkv {

struct PlannedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t num_bytes() const;
};

// The header bytes (8-byte length + padded JSON) for tensors laid out back to back in order.
std::string SafetensorsHeaderBytes(
    const std::vector<PlannedTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata);

class SafetensorsWriter {
 public:
  // Creates (truncates) `path` and writes the header.
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, std::vector<PlannedTensor> tensors,
      const std::vector<std::pair<std::string, std::string>>& metadata = {{"format", "pt"}});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends the next bytes of the data section (tensors in planned order, no gaps).
  // FAILED_PRECONDITION when more bytes than planned are appended; INTERNAL on a write error.
  absl::Status Append(absl::Span<const uint8_t> bytes);
  // Checks every planned byte was written and closes the file.
  absl::Status Finish();

 private:
  SafetensorsWriter() = default;

  std::string path_;
  std::FILE* file_ = nullptr;  // owned
  uint64_t data_bytes_ = 0;    // planned size of the data section
  uint64_t written_ = 0;
};

}  // namespace pkv
