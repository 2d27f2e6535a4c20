// Greedy selection of the cost model's inputs, ridge and margin by leave-one-out scores on the
// calibration cells (cost_model.h, InputSelection and CostFitOptions).
#include <algorithm>
#include <cmath>
#include <utility>

#include "common/status_macros.h"
#include "kernels/policy/cost_fit_internal.h"

namespace pkv::policy::internal {

using decode::Route;

// Greedy forward selection of one shared input set (and the ridge) by leave-one-out regret.
absl::Status SelectByRegret(const std::vector<CellTimes>& cells, const CostFitOptions& options,
                            FitFlags flags, std::vector<Input>* chosen, double* ridge,
                            LooScore* best) {
  const double n = static_cast<double>(cells.size());
  best->sum_log_regret = INFINITY;
  for (double lambda : options.ridges) {
    PKV_ASSIGN_OR_RETURN(LooScore s,
                         LeaveOneOut(cells, Shared(*chosen, options.route_base), lambda, flags));
    if (s.sum_log_regret < best->sum_log_regret - options.min_gain * n) {
      *best = s;
      *ridge = lambda;
    }
  }
  for (int step = 0; step < options.max_extra_inputs; ++step) {
    std::vector<Input> step_best;
    double step_ridge = *ridge;
    LooScore step_score = *best;
    for (Input in : options.candidates) {
      if (std::find(chosen->begin(), chosen->end(), in) != chosen->end()) continue;
      std::vector<Input> trial = *chosen;
      trial.push_back(in);
      for (double lambda : options.ridges) {
        PKV_ASSIGN_OR_RETURN(LooScore s,
                             LeaveOneOut(cells, Shared(trial, options.route_base), lambda, flags));
        if (s.sum_log_regret < step_score.sum_log_regret - options.min_gain * n) {
          step_score = s;
          step_best = trial;
          step_ridge = lambda;
        }
      }
    }
    if (step_best.empty()) break;
    *chosen = std::move(step_best);
    *ridge = step_ridge;
    *best = step_score;
  }
  return absl::OkStatus();
}

// Greedy forward selection of (route, input) pairs and the ridge by leave-one-out regret
// (InputSelection::kRegretPerRoute). `in` holds the starting inputs of every route.
absl::Status SelectPerRouteByRegret(const std::vector<CellTimes>& cells,
                                    const CostFitOptions& options, FitFlags flags, RouteInputs* in,
                                    double* ridge, LooScore* best) {
  const double n = static_cast<double>(cells.size());
  best->sum_log_regret = INFINITY;
  for (double lambda : options.ridges) {
    PKV_ASSIGN_OR_RETURN(LooScore s, LeaveOneOut(cells, *in, lambda, flags));
    if (s.sum_log_regret < best->sum_log_regret - options.min_gain * n) {
      *best = s;
      *ridge = lambda;
    }
  }
  std::array<int, decode::kNumRoutes> added{};
  for (;;) {
    int step_route = -1;
    Input step_input = Input::kOne;
    double step_ridge = *ridge;
    LooScore step_score = *best;
    for (Route r : kCandidateRoutes) {
      const int ri = static_cast<int>(r);
      if (added[ri] >= options.max_extra_inputs) continue;
      for (Input cand : options.candidates) {
        const std::vector<Input>& v = (*in)[ri];
        if (std::find(v.begin(), v.end(), cand) != v.end()) continue;
        std::array<std::vector<Input>, decode::kNumRoutes> trial = *in;
        trial[ri].push_back(cand);
        for (double lambda : options.ridges) {
          PKV_ASSIGN_OR_RETURN(LooScore s, LeaveOneOut(cells, trial, lambda, flags));
          if (s.sum_log_regret < step_score.sum_log_regret - options.min_gain * n) {
            step_score = s;
            step_route = ri;
            step_input = cand;
            step_ridge = lambda;
          }
        }
      }
    }
    if (step_route < 0) break;
    (*in)[step_route].push_back(step_input);
    ++added[step_route];
    *ridge = step_ridge;
    *best = step_score;
  }
  return absl::OkStatus();
}

// Greedy forward selection of each route's inputs by its leave-one-out log-time error (ridge
// fixed at the first candidate).
absl::StatusOr<std::vector<Input>> SelectForRoute(const std::vector<CellTimes>& cells,
                                                  const CostFitOptions& options, double ridge,
                                                  Route r) {
  std::vector<Input> chosen = WithOneFirst(options.base);
  PKV_ASSIGN_OR_RETURN(double best, RouteLooError(cells, chosen, ridge, r));
  for (int step = 0; step < options.max_extra_inputs; ++step) {
    std::vector<Input> step_best;
    for (Input in : options.candidates) {
      if (std::find(chosen.begin(), chosen.end(), in) != chosen.end()) continue;
      std::vector<Input> trial = chosen;
      trial.push_back(in);
      PKV_ASSIGN_OR_RETURN(double e, RouteLooError(cells, trial, ridge, r));
      // Relative gain threshold: the mean squared log error must drop by min_gain of itself.
      if (e < best * (1.0 - 100 * options.min_gain)) {
        best = e;
        step_best = trial;
      }
    }
    if (step_best.empty()) break;
    chosen = std::move(step_best);
  }
  return chosen;
}

// The margin (CostFitOptions::margins) of lowest leave-one-out regret for the selected inputs;
// a later (larger) margin must beat the best so far by min_gain. Sets flags->margin and *loo.
absl::Status SelectMargin(const std::vector<CellTimes>& cells, const CostFitOptions& options,
                          const RouteInputs& in, double ridge, FitFlags* flags, LooScore* loo) {
  const double n = static_cast<double>(cells.size());
  LooScore best;
  best.sum_log_regret = INFINITY;
  double chosen = options.margins.front();
  for (double margin : options.margins) {
    FitFlags trial = *flags;
    trial.margin = margin;
    PKV_ASSIGN_OR_RETURN(LooScore s, LeaveOneOut(cells, in, ridge, trial));
    if (s.sum_log_regret < best.sum_log_regret - options.min_gain * n) {
      best = s;
      chosen = margin;
    }
  }
  flags->margin = chosen;
  *loo = best;
  return absl::OkStatus();
}

}  // namespace pkv::policy::internal
