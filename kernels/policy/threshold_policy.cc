#include "kernels/policy/threshold_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pkv::policy {

using decode::Route;

ThresholdRules PaperRules() {
  ThresholdRules r;
  r.batch_edges = {2, 8};
  r.long_context_tokens = 16384;
  r.short_routes = {Route::kFused, Route::kFused, Route::kFused};
  r.long_routes = {Route::kSplit, Route::kFused, Route::kWorkqueue};
  return r;
}

namespace {

bool IsCandidate(Route r) {
  for (Route c : kCandidateRoutes) {
    if (c == r) return true;
  }
  return false;
}

int BatchClass(const std::vector<int32_t>& edges, int32_t batch) {
  int k = 0;
  while (k < static_cast<int>(edges.size()) && batch >= edges[k]) ++k;
  return k;
}

}  // namespace

absl::StatusOr<ThresholdPolicy> ThresholdPolicy::Create(ThresholdRules rules) {
  const size_t classes = rules.batch_edges.size() + 1;
  for (size_t i = 0; i < rules.batch_edges.size(); ++i) {
    if (rules.batch_edges[i] < 2 || (i > 0 && rules.batch_edges[i] <= rules.batch_edges[i - 1])) {
      return absl::InvalidArgumentError(
          "threshold policy: batch_edges must be strictly ascending and >= 2");
    }
  }
  if (rules.short_routes.size() != classes || rules.long_routes.size() != classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("threshold policy: ", rules.batch_edges.size(), " batch edges make ", classes,
                     " classes; short_routes has ", rules.short_routes.size(), " and long_routes ",
                     rules.long_routes.size()));
  }
  if (rules.long_context_tokens < 0) {
    return absl::InvalidArgumentError("threshold policy: long_context_tokens must be >= 0");
  }
  for (const auto* list : {&rules.short_routes, &rules.long_routes}) {
    for (Route r : *list) {
      if (!IsCandidate(r)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "threshold policy: route ", decode::RouteName(r), " cannot be chosen (ablation only)"));
      }
    }
  }
  return ThresholdPolicy(std::move(rules));
}

RouteChoice ThresholdPolicy::Choose(const BatchFeatures& batch) const {
  const int k = BatchClass(rules_.batch_edges, batch.batch);
  const bool long_context = batch.max_len >= rules_.long_context_tokens;
  const Route r = long_context ? rules_.long_routes[k] : rules_.short_routes[k];
  return RouteChoice{r, rules_.split.min_split_tokens, rules_.split.workqueue_chunk_tokens, 0.0};
}

namespace {

// ln(regret) of every candidate route on every cell: [cell][candidate].
std::vector<std::array<double, kNumCandidates>> LogRegrets(const std::vector<CellTimes>& cells) {
  std::vector<std::array<double, kNumCandidates>> out(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    for (int k = 0; k < kNumCandidates; ++k) {
      out[i][k] = std::log(cells[i].time(kCandidateRoutes[k]) / cells[i].best_us());
    }
  }
  return out;
}

// The candidate with the lowest summed log regret over the cells selected by `in`; `fallback`
// when none is selected. Returns the sum through *cost.
template <typename Pred>
int BestRoute(const std::vector<std::array<double, kNumCandidates>>& lr, Pred in, int fallback,
              double* cost) {
  std::array<double, kNumCandidates> sum{};
  bool any = false;
  for (size_t i = 0; i < lr.size(); ++i) {
    if (!in(i)) continue;
    any = true;
    for (int k = 0; k < kNumCandidates; ++k) sum[k] += lr[i][k];
  }
  if (!any) {
    *cost = 0;
    return fallback;
  }
  int best = 0;
  for (int k = 1; k < kNumCandidates; ++k) best = sum[k] < sum[best] ? k : best;
  *cost = sum[best];
  return best;
}

}  // namespace

absl::StatusOr<ThresholdRules> FitThresholdRules(const std::vector<CellTimes>& cells,
                                                 const ThresholdFitOptions& options) {
  if (cells.empty()) return absl::InvalidArgumentError("threshold fit: no calibration cells");
  for (const CellTimes& c : cells) {
    if (!c.complete()) {
      return absl::InvalidArgumentError(
          absl::StrCat("threshold fit: cell ", c.cell, " lacks a candidate route"));
    }
  }
  const auto lr = LogRegrets(cells);
  double unused = 0;
  const int overall = BestRoute(
      lr, [](size_t) { return true; }, 0, &unused);
  std::vector<int32_t> lens;
  for (const CellTimes& c : cells) lens.push_back(c.features.max_len);
  std::sort(lens.begin(), lens.end());
  lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
  std::vector<int32_t> thresholds = {0};  // 0: every batch is long context
  for (size_t i = 1; i < lens.size(); ++i) thresholds.push_back((lens[i - 1] + lens[i] + 1) / 2);

  ThresholdRules best;
  double best_cost = INFINITY;
  const auto& e = options.edge_candidates;
  for (size_t a = 0; a < e.size(); ++a) {
    for (size_t b = a + 1; b < e.size(); ++b) {
      const std::vector<int32_t> edges = {e[a], e[b]};
      for (int32_t n_long : thresholds) {
        ThresholdRules rules;
        rules.batch_edges = edges;
        rules.long_context_tokens = n_long;
        rules.split = options.split;
        double total = 0;
        for (int k = 0; k < 3; ++k) {
          for (bool is_long : {false, true}) {
            double cost = 0;
            const int route = BestRoute(
                lr,
                [&](size_t i) {
                  return BatchClass(edges, cells[i].features.batch) == k &&
                         (cells[i].features.max_len >= n_long) == is_long;
                },
                overall, &cost);
            total += cost;
            (is_long ? rules.long_routes : rules.short_routes).push_back(kCandidateRoutes[route]);
          }
        }
        if (total < best_cost - 1e-12) {
          best_cost = total;
          best = std::move(rules);
        }
      }
    }
  }
  return best;
}

}  // namespace pkv::policy
