// Small file helpers for the model loaders. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pkv {

// Reads a whole file. NOT_FOUND when it does not exist, INVALID_ARGUMENT when it is not a regular
// file or is larger than `max_bytes`, INTERNAL on a read error; messages name the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             int64_t max_bytes = int64_t{1} << 30);

// Joins a directory and a file name with exactly one '/'.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace pkv
