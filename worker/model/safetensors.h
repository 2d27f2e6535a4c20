// Reader for the safetensors checkpoint format (Hugging Face): an 8-byte little-endian header
// length N, N bytes of JSON header
//   {"<tensor name>": {"dtype": "BF16", "shape": [4096, 4096], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// then the data section; data_offsets are byte offsets relative to the data section's start.
//
// Model files are untrusted input: ParseSafetensorsHeader() does *all* validation on a byte buffer
// (the fuzz entry point) and every malformed file gives INVALID_ARGUMENT with a clear message,
// never a crash: header length within the file (and at most kMaxSafetensorsHeaderBytes), valid
// JSON object, supported dtype (F32, F16, BF16, and for quantized checkpoints I32 and F8_E4M3),
// non-negative shape dims whose product does not
// overflow, end - begin == numel * element size, offsets inside the data section, no two tensors
// overlapping, no duplicate names, string-valued metadata.
//
// SafetensorsFile maps a file read-only (mmap) and hands out views into it. Thread-safety: a
// SafetensorsFile is immutable after Open(); views are valid while it lives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pkv {

// kI32 (packed 4-bit words of AWQ/GPTQ checkpoints) and kF8E4M3 (float8_e4m3fn weights of FP8
// checkpoints) occur only in quantized tensors; dense weights are F32, F16 or BF16.
enum class DType { kF32, kF16, kBF16, kI32, kF8E4M3 };

// Bytes per element: 4, 2, 2, 4, 1.
int64_t DTypeSize(DType dtype);
// The safetensors spelling: "F32", "F16", "BF16", "I32", "F8_E4M3".
std::string_view DTypeName(DType dtype);
// Parses a safetensors dtype name; INVALID_ARGUMENT listing the supported ones otherwise.
absl::StatusOr<DType> ParseDTypeName(std::string_view name);

// Header lengths above this are rejected before any JSON parsing (the reference implementation
// uses the same 100 MB bound).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // byte offsets relative to the data section, end exclusive
  uint64_t data_end = 0;
  int64_t numel = 0;  // product of shape (1 for a scalar)
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;                   // N, the JSON header's length
  uint64_t data_offset = 0;                    // 8 + N: where the data section starts in the file
  uint64_t data_bytes = 0;                     // size of the data section
  std::vector<SafetensorsTensorInfo> tensors;  // in header order
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Parses and validates the header of a complete safetensors file held in `file_bytes` (the data
// section is not read, only its size is used). Never crashes on any input.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::Span<const uint8_t> file_bytes);

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates its header. NOT_FOUND when missing; INVALID_ARGUMENT
  // (message starting with the path) when malformed.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // nullptr when absent.
  const SafetensorsTensorInfo* Find(std::string_view name) const;
  // The tensor's raw little-endian bytes: [data_end - data_begin].
  absl::Span<const uint8_t> Data(const SafetensorsTensorInfo& info) const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  const uint8_t* map_ = nullptr;  // [map_bytes_], owned (munmap on destruction)
  size_t map_bytes_ = 0;
  SafetensorsHeader header_;
};

}  // namespace pkv
