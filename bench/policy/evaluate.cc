#include "bench/policy/evaluate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pkv::policy {

absl::StatusOr<std::vector<CellOutcome>> EvaluatePolicy(const RoutePolicy& policy,
                                                        const std::vector<CellTimes>& cells) {
  std::vector<CellOutcome> out;
  out.reserve(cells.size());
  for (const CellTimes& c : cells) {
    if (!c.complete()) {
      return absl::InvalidArgumentError(absl::StrCat("evaluate: cell ", c.cell, " at ", c.sm_count,
                                                     " SMs lacks a candidate route"));
    }
    const RouteChoice choice = policy.Choose(c.features);
    CellOutcome o;
    o.cell = c.cell;
    o.sm_count = c.sm_count;
    o.chosen = choice.route;
    o.chosen_us = c.time(choice.route);
    o.best = c.best();
    o.best_us = c.best_us();
    o.fused_us = c.time(decode::Route::kFused);
    o.predicted_us = choice.predicted_us;
    out.push_back(std::move(o));
  }
  return out;
}

EvalSummary Summarize(const std::vector<CellOutcome>& outcomes) {
  EvalSummary s;
  s.cells = static_cast<int>(outcomes.size());
  if (outcomes.empty()) return s;
  double log_regret = 0, log_speedup = 0;
  for (const CellOutcome& o : outcomes) {
    log_regret += std::log(o.regret());
    log_speedup += std::log(o.speedup_vs_fused());
    if (s.worst_cell.empty() || o.regret() > s.worst_regret) {
      s.worst_regret = o.regret();
      s.worst_cell = o.cell;
    }
    const double vs_fused = o.chosen_us / o.fused_us;
    if (vs_fused > s.worst_vs_fused) {
      s.worst_vs_fused = vs_fused;
      s.worst_vs_fused_cell = o.cell;
    }
    if (vs_fused > 1.03) ++s.slower_than_fused_3pct;
    ++s.chosen_count[static_cast<int>(o.chosen)];
  }
  s.gm_regret = std::exp(log_regret / outcomes.size());
  s.gm_speedup_vs_fused = std::exp(log_speedup / outcomes.size());
  return s;
}

}  // namespace pkv::policy
