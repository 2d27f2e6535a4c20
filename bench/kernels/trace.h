// Trace grid files (../shared/traces/README.md): one batch per line,
// name<TAB>kind<TAB>batch<TAB>comma-separated lengths; and FlashInfer's per-cell best times.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pkv::bench {

struct TraceLine {
  std::string name;
  std::string kind;
  std::vector<int32_t> lengths;
};

absl::StatusOr<std::vector<TraceLine>> ReadTrace(const std::string& path);

// trace name -> best FlashInfer GPU time in microseconds (column best_fi_us).
absl::StatusOr<std::map<std::string, double>> ReadFlashInferBest(const std::string& path);

}  // namespace pkv::bench
