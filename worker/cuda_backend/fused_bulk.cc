#include "worker/cuda_backend/fused_bulk.h"

#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pkv {
namespace {

constexpr std::array<std::pair<absl::string_view, FusedBulk>, 4> kNames = {{
    {"qkv", kBulkQkv},
    {"o", kBulkO},
    {"gateup", kBulkGateUp},
    {"down", kBulkDown},
}};

}  // namespace

absl::StatusOr<uint32_t> ParseFusedBulk(absl::string_view spec) {
  if (spec == "auto") return kFusedBulkAuto;
  if (spec == "none") return 0u;
  uint32_t bits = 0;
  for (absl::string_view name : absl::StrSplit(spec, absl::ByAnyChar(",."))) {
    uint32_t bit = 0;
    for (const auto& [n, b] : kNames) {
      if (name == n) bit = b;
    }
    if (bit == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown projection '", name, "' in '", spec,
                       "': expected auto, none, or some of qkv, o, gateup, down"));
    }
    bits |= bit;
  }
  return bits;
}

std::string FusedBulkName(uint32_t bits) {
  if (bits == kFusedBulkAuto) return "auto";
  std::vector<absl::string_view> names;
  for (const auto& [n, b] : kNames) {
    if ((bits & b) != 0) names.push_back(n);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

}  // namespace pkv
