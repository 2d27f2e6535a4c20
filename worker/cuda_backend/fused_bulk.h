// Which projections of a fused one-token step run on the bulk-copy GEMV
// (CudaBackendOptions::fused_gemv_bulk; kernels/model/gemv_bulk.cuh). Plain C++: the worker's
// flag and pkv-bench's variant names parse the same spelling.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pkv {

enum FusedBulk : uint32_t {
  kBulkQkv = 1u << 0,
  kBulkO = 1u << 1,
  kBulkGateUp = 1u << 2,
  kBulkDown = 1u << 3,
};
inline constexpr uint32_t kBulkAll = kBulkQkv | kBulkO | kBulkGateUp | kBulkDown;
// Chosen from the model when the backend loads (CudaBackendOptions::fused_gemv_bulk).
inline constexpr uint32_t kFusedBulkAuto = 1u << 31;

// "auto", "none", or projection names (qkv, o, gateup, down) separated by ',' or '.', as
// FusedBulk bits (kFusedBulkAuto for "auto"); INVALID_ARGUMENT naming what it could not read.
absl::StatusOr<uint32_t> ParseFusedBulk(absl::string_view spec);

// The spelling ParseFusedBulk reads back ("auto", "none", or names joined by ',').
std::string FusedBulkName(uint32_t bits);

}  // namespace pkv
