// Measured route times per batch: what the policies are fitted on (at start-up by the worker's
// on-start calibration, offline by `pkv-bench calibrate`) and evaluated against. One CellTimes is
// one (trace line, SM count): its features and the median GPU time of every route measured on it.
// Reading them from `pkv-bench kernels` TSVs is bench-only: bench/policy/measurements_tsv.h.
// Thread-safety: plain values.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/decode/plan.h"
#include "kernels/policy/features.h"

namespace pkv::policy {

struct CellTimes {
  std::string cell;  // trace line name, e.g. "bimodal-B8"
  int32_t sm_count = 0;
  BatchFeatures features;
  // Median GPU time of each route in microseconds, by decode::Route; NaN where not measured.
  std::array<double, decode::kNumRoutes> gpu_us;

  CellTimes() { gpu_us.fill(std::nan("")); }
  double time(decode::Route r) const { return gpu_us[static_cast<int>(r)]; }
  bool has(decode::Route r) const { return std::isfinite(time(r)); }
  // Every candidate route (route_policy.h) measured.
  bool complete() const;
  // The fastest candidate route; REQUIRES: complete().
  decode::Route best() const;
  double best_us() const { return time(best()); }
  // The best route's lead: the second-fastest candidate's time over the fastest's (>= 1).
  // REQUIRES: complete().
  double best_lead() const;
};

}  // namespace pkv::policy
