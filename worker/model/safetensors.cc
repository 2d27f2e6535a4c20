#include "worker/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace pkv {
namespace {

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status TensorError(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name, "': ", what));
}

absl::Status ParseShape(const JsonValue& entry, SafetensorsTensorInfo* t) {
  const JsonValue* shape = entry.Find("shape");
  if (shape == nullptr || !shape->is_array()) {
    return TensorError(t->name, "'shape' must be a list of integers");
  }
  int64_t numel = 1;
  for (const JsonValue& d : shape->items()) {
    if (!d.is_integer() || d.integer() < 0) {
      return TensorError(t->name, "shape dimensions must be non-negative integers");
    }
    if (__builtin_mul_overflow(numel, d.integer(), &numel)) {
      return TensorError(t->name, "shape's element count overflows");
    }
    t->shape.push_back(d.integer());
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(numel, DTypeSize(t->dtype), &bytes)) {
    return TensorError(t->name, "shape's byte size overflows");
  }
  t->numel = numel;
  return absl::OkStatus();
}

absl::Status ParseOffsets(const JsonValue& entry, uint64_t data_bytes, SafetensorsTensorInfo* t) {
  const JsonValue* offs = entry.Find("data_offsets");
  if (offs == nullptr || !offs->is_array() || offs->items().size() != 2 ||
      !offs->items()[0].is_integer() || !offs->items()[1].is_integer() ||
      offs->items()[0].integer() < 0 || offs->items()[1].integer() < 0) {
    return TensorError(t->name, "'data_offsets' must be [begin, end] of non-negative integers");
  }
  t->data_begin = static_cast<uint64_t>(offs->items()[0].integer());
  t->data_end = static_cast<uint64_t>(offs->items()[1].integer());
  if (t->data_end < t->data_begin) return TensorError(t->name, "data_offsets end < begin");
  if (t->data_end > data_bytes) {
    return TensorError(t->name,
                       absl::StrCat("data_offsets [", t->data_begin, ", ", t->data_end,
                                    ") run past the data section (", data_bytes, " bytes)"));
  }
  const uint64_t want = static_cast<uint64_t>(t->numel) * DTypeSize(t->dtype);
  if (t->data_end - t->data_begin != want) {
    return TensorError(t->name, absl::StrCat("data_offsets span ", t->data_end - t->data_begin,
                                             " bytes but shape and dtype need ", want));
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsTensorInfo> ParseEntry(const std::string& name, const JsonValue& entry,
                                                 uint64_t data_bytes) {
  SafetensorsTensorInfo t;
  t.name = name;
  if (!entry.is_object()) return TensorError(name, "entry must be an object");
  const JsonValue* dtype = entry.Find("dtype");
  if (dtype == nullptr || !dtype->is_string()) return TensorError(name, "'dtype' must be a string");
  absl::StatusOr<DType> parsed = ParseDTypeName(dtype->str());
  if (!parsed.ok()) return TensorError(name, parsed.status().message());
  t.dtype = *parsed;
  PKV_RETURN_IF_ERROR(ParseShape(entry, &t));
  PKV_RETURN_IF_ERROR(ParseOffsets(entry, data_bytes, &t));
  return t;
}

absl::Status ParseMetadata(const JsonValue& meta, SafetensorsHeader* out) {
  if (!meta.is_object()) {
    return absl::InvalidArgumentError("safetensors: '__metadata__' must be an object");
  }
  for (const auto& [key, value] : meta.members()) {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: '__metadata__' value of '", key, "' must be a string"));
    }
    out->metadata.emplace_back(key, value.str());
  }
  return absl::OkStatus();
}

// No two tensors may share bytes (empty tensors occupy none).
absl::Status CheckNoOverlap(const std::vector<SafetensorsTensorInfo>& tensors) {
  std::vector<const SafetensorsTensorInfo*> sorted;
  for (const auto& t : tensors) {
    if (t.data_end > t.data_begin) sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->data_begin < sorted[i - 1]->data_end) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensors '", sorted[i - 1]->name,
                                                     "' and '", sorted[i]->name,
                                                     "' overlap in the data section"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF8E4M3:
      return 1;
  }
  return 1;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
    case DType::kF8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

absl::StatusOr<DType> ParseDTypeName(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  if (name == "I32") return DType::kI32;
  if (name == "F8_E4M3") return DType::kF8E4M3;
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype '", Sv(name), "' is not supported (supported: F32, F16, BF16, I32, F8_E4M3)"));
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::Span<const uint8_t> file_bytes) {
  if (file_bytes.size() < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: file is ", file_bytes.size(),
                     " bytes, too short for the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file_bytes[i];
  if (n > kMaxSafetensorsHeaderBytes || n > file_bytes.size() - 8) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: header length ", n,
                                                   " exceeds the file (", file_bytes.size(),
                                                   " bytes) or the 100 MB limit"));
  }
  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_offset = 8 + n;
  h.data_bytes = file_bytes.size() - h.data_offset;
  const std::string_view text(reinterpret_cast<const char*>(file_bytes.data()) + 8, n);
  absl::StatusOr<JsonValue> root = ParseJson(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors header: ", root.status().message()));
  }
  if (!root->is_object()) {
    return absl::InvalidArgumentError("safetensors header: must be a JSON object");
  }
  absl::flat_hash_set<std::string> seen;
  for (const auto& [name, entry] : root->members()) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: duplicate entry '", name, "' in the header"));
    }
    if (name == "__metadata__") {
      PKV_RETURN_IF_ERROR(ParseMetadata(entry, &h));
      continue;
    }
    PKV_ASSIGN_OR_RETURN(SafetensorsTensorInfo t, ParseEntry(name, entry, h.data_bytes));
    h.tensors.push_back(std::move(t));
  }
  PKV_RETURN_IF_ERROR(CheckNoOverlap(h.tensors));
  return h;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_bytes_ = static_cast<size_t>(st.st_size);
  if (file->map_bytes_ > 0) {
    void* p = ::mmap(nullptr, file->map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      file->map_bytes_ = 0;
      return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(errno)));
    }
    file->map_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(absl::MakeConstSpan(file->map_, file->map_bytes_));
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrCat(path, ": ", header.status().message()));
  }
  file->header_ = *std::move(header);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
}

const SafetensorsTensorInfo* SafetensorsFile::Find(std::string_view name) const {
  for (const auto& t : header_.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::Span<const uint8_t> SafetensorsFile::Data(const SafetensorsTensorInfo& info) const {
  return absl::MakeConstSpan(map_ + header_.data_offset + info.data_begin,
                             info.data_end - info.data_begin);
}

}  // namespace pkv
