#include "worker/tools/safetensors_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pkv {

int64_t PlannedTensor::num_bytes() const {
  int64_t n = DTypeSize(dtype);
  for (int64_t d : shape) n *= d;
  return n;
}

std::string SafetensorsHeaderBytes(
    const std::vector<PlannedTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      absl::StrAppend(&json, i ? "," : "", "\"", metadata[i].first, "\":\"", metadata[i].second,
                      "\"");
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PlannedTensor& t = tensors[i];
    const uint64_t end = offset + static_cast<uint64_t>(t.num_bytes());
    const std::string_view dtype = DTypeName(t.dtype);
    absl::StrAppend(&json, (i || !metadata.empty()) ? "," : "", "\"", t.name, "\":{\"dtype\":\"",
                    absl::string_view(dtype.data(), dtype.size()), "\",\"shape\":[",
                    absl::StrJoin(t.shape, ","), "],\"data_offsets\":[", offset, ",", end, "]}");
    offset = end;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, std::vector<PlannedTensor> tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  for (const PlannedTensor& t : tensors) w->data_bytes_ += static_cast<uint64_t>(t.num_bytes());
  w->file_ = std::fopen(path.c_str(), "wb");
  if (w->file_ == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  const std::string header = SafetensorsHeaderBytes(tensors, metadata);
  if (std::fwrite(header.data(), 1, header.size(), w->file_) != header.size()) {
    return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status SafetensorsWriter::Append(absl::Span<const uint8_t> bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError("writer is finished");
  if (written_ + bytes.size() > data_bytes_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": appending ", bytes.size(),
                                                      " bytes overruns the planned ", data_bytes_));
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return absl::InternalError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
  }
  written_ += bytes.size();
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Finish() {
  if (file_ == nullptr) return absl::FailedPreconditionError("writer is finished");
  std::FILE* f = file_;
  file_ = nullptr;
  const bool close_failed = std::fclose(f) != 0;
  if (written_ != data_bytes_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": wrote ", written_, " of ", data_bytes_, " planned data bytes"));
  }
  if (close_failed) {
    return absl::InternalError(absl::StrCat(path_, ": close failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace pkv
