// Scoring a route policy against measured route times (issue 8, point 4): per cell the chosen
// route, its regret (chosen time / best candidate's time) and its speed-up against `fused`; per
// grid the worst and geometric-mean regret, the geometric-mean speed-up against fused and how
// often the choice is slower than fused. Thread-safety: pure functions.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/route_policy.h"

namespace pkv::policy {

struct CellOutcome {
  std::string cell;
  int32_t sm_count = 0;
  decode::Route chosen = decode::Route::kWorkqueue;
  double chosen_us = 0;
  decode::Route best = decode::Route::kWorkqueue;
  double best_us = 0;
  double fused_us = 0;
  double predicted_us = 0;  // the policy's own estimate (0: none)
  double regret() const { return chosen_us / best_us; }
  double speedup_vs_fused() const { return fused_us / chosen_us; }
};

struct EvalSummary {
  int cells = 0;
  double worst_regret = 1.0;
  std::string worst_cell;
  double gm_regret = 1.0;
  double gm_speedup_vs_fused = 1.0;
  double worst_vs_fused = 0.0;  // max over cells of chosen / fused time (> 1: slower than fused)
  std::string worst_vs_fused_cell;
  int slower_than_fused_3pct = 0;  // cells where chosen > 1.03 x fused
  std::array<int, decode::kNumRoutes> chosen_count{};
};

// INVALID_ARGUMENT when a cell lacks a candidate route's time.
absl::StatusOr<std::vector<CellOutcome>> EvaluatePolicy(const RoutePolicy& policy,
                                                        const std::vector<CellTimes>& cells);
EvalSummary Summarize(const std::vector<CellOutcome>& outcomes);

}  // namespace pkv::policy
