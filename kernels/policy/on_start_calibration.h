// The worker's on-start calibration (issue 8): a worker that finds no policy file for its GPU
// times the candidate routes through the engine on a reduced grid of synthetic batches and fits
// both policies from those times (the same fits as `pkv-bench calibrate`). Timing is pkv-bench
// kernels' method (route_timer.h: plan upload, L2 flush, CUDA events around the launch, median).
// Bounded: cells are measured smallest first and the loop stops once `budget_s` is spent (at
// least kMinCells cells are needed for a fit); it prints a progress line per cell. Uses its own
// device buffers (at most max_kv_bytes of K/V plus a 256 MiB flush buffer), all freed before it
// returns, so call it before the KV pool takes the free memory. CUDA builds only.
// Thread-safety: not thread-safe; owns the device while it runs (one stream, synchronous).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_launch.h"
#include "kernels/policy/calibration_grid.h"
#include "kernels/policy/policy_file.h"

namespace pkv::policy {

inline constexpr int kMinCells = 8;

struct OnStartCalibrationOptions {
  std::string gpu_name;
  KvShape shape;
  decode::DType dtype = decode::DType::kBFloat16;
  decode::KernelConfig config;  // the worker's kernel configuration
  decode::DeviceLimits limits;  // as the worker's planner sees them
  double budget_s = 30.0;
  int iters = 10;                            // timed iterations per route and cell
  int64_t max_kv_bytes = int64_t{2} << 30;   // K + V bytes of the largest cell
  int64_t flush_bytes = int64_t{256} << 20;  // the L2 flush buffer (pkv-bench kernels' default)
  uint32_t seed = 20260622;                  // the synthetic grid's lengths
  std::function<void(const std::string&)> progress;  // one line per cell; may be empty
};

// Measures the grid and fits: kind "learned", source "on-start calibration ...".
// RESOURCE_EXHAUSTED when the buffers do not fit; DEADLINE_EXCEEDED when the budget ended before
// kMinCells cells; other CUDA errors as their status.
absl::StatusOr<PolicyFile> CalibrateOnDevice(const OnStartCalibrationOptions& options,
                                             cudaStream_t stream);

}  // namespace pkv::policy
