// The paper's adaptive policy (paper.md, "Adaptive policy"): hand-set thresholds on the batch size
// B and the longest context N_max, here with the thresholds and each region's route fitted on
// calibration measurements instead of set by hand.
//
// Batch sizes fall into classes by `batch_edges` (ascending): class 0 is B < edges[0], class k is
// edges[k-1] <= B < edges[k], the last is B >= edges.back(). Each class has one route for short
// context (N_max < long_context_tokens) and one for long context. The paper's rules for the RTX
// 3060 are one instance (PaperRules): edges {2, 8}, long context from 16384 tokens;
//   B = 1, long: split;   2 <= B < 8: fused ("the boundary");   B >= 8, long: workqueue;
//   everything short: fused (the paper's single FlashInfer kernel).
// Rule example with the fit on the H200 calibration grid: see policies/*.json.
// Thread-safety: immutable after construction; Choose() is const and allocation-free.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/route_policy.h"

namespace pkv::policy {

struct ThresholdRules {
  std::vector<int32_t> batch_edges;         // ascending, each >= 2
  int32_t long_context_tokens = 0;          // N_max >= this is long context
  std::vector<decode::Route> short_routes;  // [batch_edges.size() + 1]
  std::vector<decode::Route> long_routes;   // [batch_edges.size() + 1]
  SplitParams split;
};

// The paper's hand-set rules (above), unfitted: for comparison only.
ThresholdRules PaperRules();

class ThresholdPolicy final : public RoutePolicy {
 public:
  // INVALID_ARGUMENT for unsorted or < 2 edges, route lists of the wrong length, a route outside
  // the candidates, or a negative long-context threshold.
  static absl::StatusOr<ThresholdPolicy> Create(ThresholdRules rules);

  RouteChoice Choose(const BatchFeatures& batch) const override;
  absl::string_view kind() const override { return "threshold"; }
  const ThresholdRules& rules() const { return rules_; }

 private:
  explicit ThresholdPolicy(ThresholdRules rules) : rules_(std::move(rules)) {}
  ThresholdRules rules_;
};

struct ThresholdFitOptions {
  // Candidate batch edges; the fit picks two of them (three batch classes, as the paper).
  std::vector<int32_t> edge_candidates = {2, 4, 8, 16, 32, 64, 128};
  SplitParams split;
};

// Exhaustive search over edge pairs and long-context thresholds (midpoints between the cells'
// distinct N_max values); each region gets the route with the lowest summed log regret over its
// cells (an empty region: the route best over all cells). The objective is the geometric-mean
// regret over the cells; ties keep the earlier (smaller) thresholds. INVALID_ARGUMENT for no
// cells or an incomplete cell.
absl::StatusOr<ThresholdRules> FitThresholdRules(const std::vector<CellTimes>& cells,
                                                 const ThresholdFitOptions& options);

}  // namespace pkv::policy
