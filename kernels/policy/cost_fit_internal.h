// Internals of the cost-model fit (cost_model.h's FitCostModel), shared by cost_model.cc (the
// least-squares fits and leave-one-out scores) and input_selection.cc (the greedy selection of
// inputs, ridge and margin by those scores). Not an API: only those two files include it.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/measurements.h"

namespace pkv::policy::internal {

using RouteInputs = std::array<std::vector<Input>, decode::kNumRoutes>;  // by decode::Route

// What the fit does besides least squares (CostFitOptions' drop_never_best, clamp_inputs; the
// margin being tried).
struct FitFlags {
  bool drop_never_best = false;
  double min_best_lead = 1.0;  // CostFitOptions::min_best_lead
  bool clamp_inputs = false;
  double margin = 0.0;  // CostModel::margin
};

struct LooScore {
  double sum_log_regret = 0;
  double worst = 1.0;
};

// One route's model on `cells` except `skip` (-1: none).
absl::StatusOr<RouteModel> FitRoute(const std::vector<CellTimes>& cells,
                                    const std::vector<Input>& inputs, double ridge, int skip,
                                    decode::Route route);
// Every candidate route fitted with its inputs and ridge, except cell `skip` (-1: none).
absl::StatusOr<CostModel> FitExcept(const std::vector<CellTimes>& cells, const RouteInputs& in,
                                    double ridge, int skip, const SplitParams& split,
                                    FitFlags flags);
// Each route's inputs: the shared ones plus the route's own (CostFitOptions::route_base).
RouteInputs Shared(const std::vector<Input>& inputs, const RouteInputs& route_base);
// Leave-one-out regret of the choice.
absl::StatusOr<LooScore> LeaveOneOut(const std::vector<CellTimes>& cells, const RouteInputs& in,
                                     double ridge, FitFlags flags);
// Leave-one-out squared error of one route's log-time prediction.
absl::StatusOr<double> RouteLooError(const std::vector<CellTimes>& cells,
                                     const std::vector<Input>& inputs, double ridge,
                                     decode::Route r);
std::vector<Input> WithOneFirst(std::vector<Input> inputs);

// The selections (InputSelection; CostFitOptions::margins), in input_selection.cc.
absl::Status SelectByRegret(const std::vector<CellTimes>& cells, const CostFitOptions& options,
                            FitFlags flags, std::vector<Input>* chosen, double* ridge,
                            LooScore* best);
absl::Status SelectPerRouteByRegret(const std::vector<CellTimes>& cells,
                                    const CostFitOptions& options, FitFlags flags, RouteInputs* in,
                                    double* ridge, LooScore* best);
absl::StatusOr<std::vector<Input>> SelectForRoute(const std::vector<CellTimes>& cells,
                                                  const CostFitOptions& options, double ridge,
                                                  decode::Route r);
absl::Status SelectMargin(const std::vector<CellTimes>& cells, const CostFitOptions& options,
                          const RouteInputs& in, double ridge, FitFlags* flags, LooScore* loo);

}  // namespace pkv::policy::internal
