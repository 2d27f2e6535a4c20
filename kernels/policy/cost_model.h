// The learned cost model (issue 8, point 3), the default route policy.
//
// Per candidate route r, a linear model of the log of the step's GPU time over transformed batch
// features (features.h, ModelInputs):   ln(t_r / 1 us) = sum_k w_rk * x_k
// fitted by ridge least squares on one GPU's (and SM count's) calibration measurements; the
// policy chooses the route with the lowest predicted time. Log space makes the fit minimise
// relative error (a 5% miss costs the same at 10 us as at 1 ms), which is what a choice between
// two routes depends on, and keeps every prediction positive.
//
// Which inputs a model uses is itself fitted (FitCostModel): starting from {one,
// log_bytes_per_slot} (the time scale: launch floor to bandwidth-bound), inputs are added greedily
// while they lower the leave-one-out regret on the calibration cells (each cell's route chosen by
// a model fitted without it), together with the ridge strength. That keeps the model as small as
// the data supports (40-odd cells per GPU) and is decided on calibration data only.
// Thread-safety: CostModelPolicy is immutable after Create; Choose() is const and allocation-free.
#pragma once

#include <array>
#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/decode/plan.h"
#include "kernels/policy/features.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/route_policy.h"

namespace pkv::policy {

// ln(t / 1 us) = sum_k coef[k] * x[inputs[k]] for one route.
struct RouteModel {
  std::vector<Input> inputs;
  std::vector<double> coef;  // [inputs.size()]
  bool empty() const { return inputs.empty(); }
};

struct CostModel {
  // By decode::Route; an empty model: the route is not modelled and never chosen.
  std::array<RouteModel, decode::kNumRoutes> routes;
  // Inputs are clamped to the range the calibration cells spanned before they are used, so a
  // batch beyond the calibration grid (longer contexts, larger batches) is predicted as at the
  // grid's edge instead of by extrapolating a polynomial. Default: no clamping.
  std::array<double, kNumInputs> input_lo;
  std::array<double, kNumInputs> input_hi;
  double ridge = 0.0;  // the lambda it was fitted with (informational)
  SplitParams split;
  // Policy v2: the choice leaves `default_route` (the best single route on the calibration
  // cells) only when another route is predicted faster by more than `margin` in log time
  // (0.02: 2%). A prediction error smaller than the margin then costs at most the default's own
  // regret. Margin 0 (policy files of version 1): the lowest prediction wins.
  decode::Route default_route = decode::Route::kWorkqueue;
  double margin = 0.0;

  CostModel() {
    input_lo.fill(-INFINITY);
    input_hi.fill(INFINITY);
  }
};

class CostModelPolicy final : public RoutePolicy {
 public:
  // INVALID_ARGUMENT when a route's coefficients do not match its inputs, a coefficient is not
  // finite, an input repeats within a route, no candidate route is modelled, or the margin is
  // negative, not finite, or set with a default route that is not modelled.
  static absl::StatusOr<CostModelPolicy> Create(const CostModel& model);

  RouteChoice Choose(const BatchFeatures& batch) const override;
  absl::string_view kind() const override { return "learned"; }
  // Predicted GPU time of `route` in microseconds; NaN for a route the model does not cover.
  double PredictUs(const BatchFeatures& batch, decode::Route route) const;

 private:
  CostModelPolicy() = default;
  ModelInputs Inputs(const BatchFeatures& batch) const;
  double LogPredict(const ModelInputs& x, int route) const;

  // Coefficients over all kNumInputs (zero for inputs the model does not use), so Choose() is a
  // fixed-size loop with no indirection.
  std::array<ModelInputs, decode::kNumRoutes> dense_{};
  std::array<bool, decode::kNumRoutes> modelled_{};
  ModelInputs lo_{}, hi_{};
  SplitParams split_;
  bool uses_v2_inputs_ = false;  // some route uses an input from kFirstV2Input on
  int default_route_ = static_cast<int>(decode::Route::kWorkqueue);
  double margin_ = 0.0;
};

// Some route uses a length-shape input (features.h, kFirstV3Input): evaluating the model on
// recorded measurements needs their traces (trace_join.h).
bool UsesLengthShape(const CostModel& model);

enum class InputSelection {
  kRegret,         // one input set for all routes, by leave-one-out regret of the choice
  kPerRouteError,  // each route its own inputs, by leave-one-out error of its log-time prediction
  // Policy v2: each route its own inputs, by leave-one-out regret of the choice. A step adds the
  // one (route, input) pair, with the ridge, that lowers the regret most; a route takes at most
  // max_extra_inputs. A choice depends only on the differences between routes' predictions, so
  // an input may describe one route's weakness without being forced on the others.
  kRegretPerRoute,
};

struct CostFitOptions {
  InputSelection selection = InputSelection::kRegret;
  std::vector<Input> base = {Input::kOne, Input::kLogBytesPerSlot};  // always used
  // Per route (by decode::Route), inputs its model always has besides the shared ones: the
  // known weakness of each route's work split (see features.h): fused's longest pair, split's
  // padding to the longest row, the workqueue's wave-limited splitting.
  std::array<std::vector<Input>, decode::kNumRoutes> route_base = {
      std::vector<Input>{Input::kLogFusedImbalance}, std::vector<Input>{Input::kMeanOverMax},
      std::vector<Input>{Input::kLogWqImbalance}, std::vector<Input>{}, std::vector<Input>{}};
  std::vector<Input> candidates = {Input::kLogBytesPerSlotSq,
                                   Input::kLogWqImbalance,
                                   Input::kFill,
                                   Input::kLenCv,
                                   Input::kMeanOverMax,
                                   Input::kLog2Batch,
                                   Input::kLogPairMiB,
                                   Input::kLogFusedImbalance};
  int max_extra_inputs = 3;
  std::vector<double> ridges = {0.0, 0.03, 0.3};
  // An input (or ridge) is only taken when it lowers the mean leave-one-out log regret by more
  // than this (0.0005: 0.05% of geometric-mean regret), so noise does not grow the model.
  double min_gain = 0.0005;
  // Margins (CostModel::margin) tried after the inputs are selected, by the same leave-one-out
  // regret; the first is the fallback. {0}: no margin.
  std::vector<double> margins = {0.0};
  // Leave routes that are the fastest on no calibration cell unmodelled (never chosen): a route
  // the calibration never saw win can only be chosen by a prediction error.
  bool drop_never_best = true;
  // ... and a route counts as the fastest on a cell only when it leads the next route by at least
  // this factor (1.0: any lead). A route that wins only within one sweep's noise (2026-12-05:
  // fused on zipf-B1 by 0.6-1.9%) is otherwise modelled from cells it never wins and chosen by
  // its prediction error (fused on bucketed-B8-N1024 at 66 SMs: 26.6 us for 20.6). 1.03 passed
  // policy v2's rule on the balanced-workqueue calibration sweeps, 16-bit and FP8 (nested
  // leave-one-out and leave-one-kind-out both better at 132 and 66 SMs, no worse worst cell;
  // 16-bit nested 1.0163 / 1.530 -> 1.0087 / 1.118 at 132, 1.0310 / 1.544 -> 1.0058 / 1.040 at
  // 66: bench/NOTES.md, seventeenth session).
  double min_best_lead = 1.03;
  // Clamp inputs to the calibration range (CostModel::input_lo/hi).
  bool clamp_inputs = true;
  SplitParams split;
};

// What the fit achieved on its own calibration cells.
struct CostFitReport {
  int cells = 0;
  double loo_gm_regret = 1.0;     // geometric mean of leave-one-out regret
  double loo_worst_regret = 1.0;  // worst leave-one-out regret
  double fit_rms_log_error = 0;   // RMS of ln(predicted / measured) over routes and cells
};

// Fits the model with the given inputs and ridge (no selection). REQUIRES nothing of the inputs'
// order; kOne is added first when missing. INVALID_ARGUMENT for no cells or an incomplete cell.
absl::StatusOr<CostModel> FitCostModelWith(const std::vector<CellTimes>& cells,
                                           std::vector<Input> inputs, double ridge,
                                           const SplitParams& split);

// Selects inputs and ridge by leave-one-out regret, then fits on all cells (see the top comment).
// With fewer than 4 cells only the base inputs are fitted.
absl::StatusOr<CostModel> FitCostModel(const std::vector<CellTimes>& cells,
                                       const CostFitOptions& options,
                                       CostFitReport* report = nullptr);

}  // namespace pkv::policy
