// The decode-route policy interface (issue 8): every decode step the worker asks a RoutePolicy
// which route the planner should plan for the batch, from the batch's features and the GPU's
// limits (features.h). Implementations:
//   FixedPolicy        one route always (the engine's default, or a --decode_route override)
//   ThresholdPolicy    the paper's hand-set thresholds on (B, N_max), fitted (threshold_policy.h)
//   CostModelPolicy    a learned per-route model of step time, lowest prediction wins
//                      (cost_model.h); the default
// Choose() is deterministic, allocation-free and O(1) in the batch (the features are already a
// summary), well under a microsecond: it runs on the scheduler thread every step.
// Thread-safety: Choose() is const and touches no shared mutable state; a policy may be used from
// several threads once built.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "kernels/decode/plan.h"
#include "kernels/policy/features.h"

namespace pkv::policy {

// The routes a policy may choose. bucketed-exact is the paper's ablation (one launch pair per
// distinct length, not graph-capturable) and is never chosen.
inline constexpr decode::Route kCandidateRoutes[] = {decode::Route::kFused, decode::Route::kSplit,
                                                     decode::Route::kWorkqueue,
                                                     decode::Route::kPersistent};
inline constexpr int kNumCandidates = 4;

// The route and the split parameters the planner takes from PlanOptions.
struct RouteChoice {
  decode::Route route = decode::Route::kWorkqueue;
  int32_t min_split_tokens = 128;      // PlanOptions::min_split_tokens
  int32_t workqueue_chunk_tokens = 0;  // PlanOptions::workqueue_chunk_tokens (0: wave model)
  double predicted_us = 0.0;           // the cost model's estimate; 0 when there is none

  // Writes route and split parameters into `options`, leaving its other fields alone.
  void ApplyTo(decode::PlanOptions* options) const {
    options->route = route;
    options->min_split_tokens = min_split_tokens;
    options->workqueue_chunk_tokens = workqueue_chunk_tokens;
  }
};

// Split parameters a policy file may set for every route it chooses (defaults: the planner's).
struct SplitParams {
  int32_t min_split_tokens = 128;
  int32_t workqueue_chunk_tokens = 0;
};

class RoutePolicy {
 public:
  virtual ~RoutePolicy() = default;
  virtual RouteChoice Choose(const BatchFeatures& batch) const = 0;
  // "fixed", "threshold" or "learned": the policy-file kind and the log label.
  virtual absl::string_view kind() const = 0;
};

class FixedPolicy final : public RoutePolicy {
 public:
  explicit FixedPolicy(decode::Route route, SplitParams params = {})
      : route_(route), params_(params) {}
  RouteChoice Choose(const BatchFeatures&) const override {
    return RouteChoice{route_, params_.min_split_tokens, params_.workqueue_chunk_tokens, 0.0};
  }
  absl::string_view kind() const override { return "fixed"; }

 private:
  decode::Route route_;
  SplitParams params_;
};

}  // namespace pkv::policy
