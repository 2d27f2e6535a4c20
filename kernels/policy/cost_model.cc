#include "kernels/policy/cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/policy/cost_fit_internal.h"
#include "kernels/policy/least_squares.h"

namespace pkv::policy {

using decode::Route;

absl::StatusOr<CostModelPolicy> CostModelPolicy::Create(const CostModel& model) {
  CostModelPolicy p;
  p.split_ = model.split;
  for (int k = 0; k < kNumInputs; ++k) {
    if (std::isnan(model.input_lo[k]) || std::isnan(model.input_hi[k]) ||
        model.input_lo[k] > model.input_hi[k]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cost model: input range of '", InputName(static_cast<Input>(k)), "' is empty or NaN"));
    }
  }
  p.lo_ = model.input_lo;
  p.hi_ = model.input_hi;
  bool any = false;
  for (Route r : kCandidateRoutes) {
    const int ri = static_cast<int>(r);
    const RouteModel& m = model.routes[ri];
    if (m.empty()) continue;
    if (m.coef.size() != m.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("cost model: route ", decode::RouteName(r),
                                                     " has ", m.coef.size(), " coefficients for ",
                                                     m.inputs.size(), " inputs"));
    }
    for (size_t k = 0; k < m.inputs.size(); ++k) {
      for (size_t j = 0; j < k; ++j) {
        if (m.inputs[k] == m.inputs[j]) {
          return absl::InvalidArgumentError(absl::StrCat("cost model: route ", decode::RouteName(r),
                                                         " lists input '", InputName(m.inputs[k]),
                                                         "' twice"));
        }
      }
      if (!std::isfinite(m.coef[k])) {
        return absl::InvalidArgumentError(absl::StrCat("cost model: route ", decode::RouteName(r),
                                                       " has a non-finite coefficient"));
      }
      p.dense_[ri][static_cast<int>(m.inputs[k])] = m.coef[k];
      p.uses_v2_inputs_ =
          p.uses_v2_inputs_ || (m.inputs[k] >= kFirstV2Input && m.inputs[k] < kFirstV3Input);
    }
    p.modelled_[ri] = true;
    any = true;
  }
  if (!any) return absl::InvalidArgumentError("cost model: no candidate route is modelled");
  const int d = static_cast<int>(model.default_route);
  if (!(model.margin >= 0) || !std::isfinite(model.margin)) {
    return absl::InvalidArgumentError("cost model: margin must be finite and >= 0");
  }
  if (model.margin > 0 && (d < 0 || d >= decode::kNumRoutes || !p.modelled_[d])) {
    return absl::InvalidArgumentError("cost model: a margin needs a modelled default route");
  }
  p.default_route_ = d;
  p.margin_ = model.margin;
  return p;
}

ModelInputs CostModelPolicy::Inputs(const BatchFeatures& batch) const {
  ModelInputs x = ComputeInputs(batch, uses_v2_inputs_);
  for (int k = 0; k < kNumInputs; ++k) x[k] = std::clamp(x[k], lo_[k], hi_[k]);
  return x;
}

double CostModelPolicy::LogPredict(const ModelInputs& x, int route) const {
  double s = 0.0;
  for (int k = 0; k < kNumInputs; ++k) s += dense_[route][k] * x[k];
  return s;
}

RouteChoice CostModelPolicy::Choose(const BatchFeatures& batch) const {
  const ModelInputs x = Inputs(batch);
  Route best = Route::kWorkqueue;
  double best_log = INFINITY;
  // The split route on a batch it cannot cut is the fused route, which is modelled only where
  // calibration saw it win; its own model describes batches it cuts (FitRoute).
  const bool split_cuts = SplitRouteCuts(batch);
  for (Route r : kCandidateRoutes) {
    const int ri = static_cast<int>(r);
    if (!modelled_[ri] || (r == Route::kSplit && !split_cuts)) continue;
    const double v = LogPredict(x, ri);
    if (v < best_log) {
      best_log = v;
      best = r;
    }
  }
  if (margin_ > 0 && static_cast<int>(best) != default_route_) {
    const double d = LogPredict(x, default_route_);
    if (d - best_log <= margin_) {
      best_log = d;
      best = static_cast<Route>(default_route_);
    }
  }
  return RouteChoice{best, split_.min_split_tokens, split_.workqueue_chunk_tokens,
                     std::exp(best_log)};
}

bool UsesLengthShape(const CostModel& model) {
  for (const RouteModel& m : model.routes) {
    for (Input in : m.inputs) {
      if (IsLengthShapeInput(in)) return true;
    }
  }
  return false;
}

double CostModelPolicy::PredictUs(const BatchFeatures& batch, Route route) const {
  const int ri = static_cast<int>(route);
  if (ri < 0 || ri >= decode::kNumRoutes || !modelled_[ri]) return std::nan("");
  return std::exp(LogPredict(Inputs(batch), ri));
}

namespace internal {

static absl::Status CheckCells(const std::vector<CellTimes>& cells) {
  if (cells.empty()) return absl::InvalidArgumentError("cost model fit: no calibration cells");
  for (const CellTimes& c : cells) {
    if (!c.complete()) {
      return absl::InvalidArgumentError(absl::StrCat("cost model fit: cell ", c.cell, " at ",
                                                     c.sm_count, " SMs lacks a candidate route"));
    }
  }
  return absl::OkStatus();
}

// A fit that may use a length-shape input needs it on every cell (measurements read without
// --traces do not have it, and would fit the input as 0).
static absl::Status CheckLengthShape(const std::vector<CellTimes>& cells,
                                     const std::vector<std::vector<Input>>& input_lists) {
  bool needed = false;
  for (const std::vector<Input>& list : input_lists) {
    for (Input in : list) needed = needed || IsLengthShapeInput(in);
  }
  if (!needed) return absl::OkStatus();
  for (const CellTimes& c : cells) {
    if (!c.features.has_length_shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cost model fit: cell ", c.cell,
          " has no length shape, which input long_frac / "
          "long_token_frac needs (read the measurements with their traces: --traces)"));
    }
  }
  return absl::OkStatus();
}

// Fits one route's model on `cells` except `skip` (-1: none).
absl::StatusOr<RouteModel> FitRoute(const std::vector<CellTimes>& cells,
                                    const std::vector<Input>& inputs, double ridge, int skip,
                                    Route route) {
  std::vector<double> a, b;
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
    if (i == skip) continue;
    // The split route's time on a batch it cannot cut is the fused route's (features.h,
    // SplitRouteCuts): it says nothing of splitting, and the policy never takes split there.
    if (route == Route::kSplit && !SplitRouteCuts(cells[i].features)) continue;
    const ModelInputs x = ComputeInputs(cells[i].features);
    for (Input in : inputs) a.push_back(x[static_cast<int>(in)]);
    b.push_back(std::log(cells[i].time(route)));
  }
  RouteModel m;
  if (b.empty() && route == Route::kSplit) return m;  // no cell it cuts: not modelled
  m.inputs = inputs;
  PKV_ASSIGN_OR_RETURN(m.coef, RidgeLeastSquares(a, b, static_cast<int>(inputs.size()), ridge));
  return m;
}

// The route of lowest geometric-mean regret when always taken, over `cells` except `skip`.
static Route BestSingleRoute(const std::vector<CellTimes>& cells, int skip) {
  Route best = Route::kWorkqueue;
  double best_sum = INFINITY;
  for (Route r : kCandidateRoutes) {
    double sum = 0;
    for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
      if (i != skip) sum += std::log(cells[i].time(r) / cells[i].best_us());
    }
    if (sum < best_sum) {
      best_sum = sum;
      best = r;
    }
  }
  return best;
}

absl::StatusOr<CostModel> FitExcept(const std::vector<CellTimes>& cells,
                                    const std::array<std::vector<Input>, decode::kNumRoutes>& in,
                                    double ridge, int skip, const SplitParams& split,
                                    FitFlags flags) {
  CostModel m;
  m.ridge = ridge;
  m.split = split;
  m.default_route = BestSingleRoute(cells, skip);
  m.margin = flags.margin;
  std::array<bool, decode::kNumRoutes> ever_best{};
  std::array<double, kNumInputs> lo, hi;
  lo.fill(INFINITY);
  hi.fill(-INFINITY);
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
    if (i == skip) continue;
    if (cells[i].best_lead() >= flags.min_best_lead) {
      ever_best[static_cast<int>(cells[i].best())] = true;
    }
    const ModelInputs x = ComputeInputs(cells[i].features);
    for (int k = 0; k < kNumInputs; ++k) {
      lo[k] = std::min(lo[k], x[k]);
      hi[k] = std::max(hi[k], x[k]);
    }
  }
  if (flags.clamp_inputs) {
    m.input_lo = lo;
    m.input_hi = hi;
  }
  for (Route r : kCandidateRoutes) {
    const int ri = static_cast<int>(r);
    // The default route (the best single route) is always modelled: with min_best_lead > 1 a
    // calibration set of near-ties may have no route that is decisively the fastest anywhere.
    if (flags.drop_never_best && !ever_best[ri] && r != m.default_route) continue;
    PKV_ASSIGN_OR_RETURN(m.routes[ri], FitRoute(cells, in[ri], ridge, skip, r));
  }
  // Only inputs a route uses keep a range (clamping the others changes nothing; the policy file
  // then names only inputs the model needs).
  std::array<bool, kNumInputs> used{};
  for (const RouteModel& rm : m.routes) {
    for (Input x : rm.inputs) used[static_cast<int>(x)] = true;
  }
  for (int k = 0; k < kNumInputs; ++k) {
    if (!used[k]) {
      m.input_lo[k] = -INFINITY;
      m.input_hi[k] = INFINITY;
    }
  }
  return m;
}

// Each route's inputs: the shared ones plus the route's own (CostFitOptions::route_base).
std::array<std::vector<Input>, decode::kNumRoutes> Shared(
    const std::vector<Input>& inputs,
    const std::array<std::vector<Input>, decode::kNumRoutes>& route_base) {
  std::array<std::vector<Input>, decode::kNumRoutes> in;
  for (Route r : kCandidateRoutes) {
    std::vector<Input>& v = in[static_cast<int>(r)];
    v = inputs;
    for (Input extra : route_base[static_cast<int>(r)]) {
      if (std::find(v.begin(), v.end(), extra) == v.end()) v.push_back(extra);
    }
  }
  return in;
}

absl::StatusOr<LooScore> LeaveOneOut(const std::vector<CellTimes>& cells,
                                     const std::array<std::vector<Input>, decode::kNumRoutes>& in,
                                     double ridge, FitFlags flags) {
  LooScore s;
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
    PKV_ASSIGN_OR_RETURN(CostModel m, FitExcept(cells, in, ridge, i, SplitParams{}, flags));
    PKV_ASSIGN_OR_RETURN(CostModelPolicy p, CostModelPolicy::Create(m));
    const double regret = cells[i].time(p.Choose(cells[i].features).route) / cells[i].best_us();
    s.sum_log_regret += std::log(regret);
    s.worst = std::max(s.worst, regret);
  }
  return s;
}

// Leave-one-out squared error of one route's log-time prediction.
absl::StatusOr<double> RouteLooError(const std::vector<CellTimes>& cells,
                                     const std::vector<Input>& inputs, double ridge, Route r) {
  double sq = 0;
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
    PKV_ASSIGN_OR_RETURN(RouteModel m, FitRoute(cells, inputs, ridge, i, r));
    const ModelInputs x = ComputeInputs(cells[i].features);
    double pred = 0;
    for (size_t k = 0; k < m.inputs.size(); ++k)
      pred += m.coef[k] * x[static_cast<int>(m.inputs[k])];
    const double e = pred - std::log(cells[i].time(r));
    sq += e * e;
  }
  return sq;
}

std::vector<Input> WithOneFirst(std::vector<Input> inputs) {
  inputs.erase(std::remove(inputs.begin(), inputs.end(), Input::kOne), inputs.end());
  inputs.insert(inputs.begin(), Input::kOne);
  return inputs;
}

static void FillReport(const std::vector<CellTimes>& cells, const CostModel& m, const LooScore& loo,
                       CostFitReport* report) {
  if (report == nullptr) return;
  report->cells = static_cast<int>(cells.size());
  report->loo_gm_regret = std::exp(loo.sum_log_regret / cells.size());
  report->loo_worst_regret = loo.worst;
  absl::StatusOr<CostModelPolicy> p = CostModelPolicy::Create(m);
  double sq = 0;
  int n = 0;
  for (const CellTimes& c : cells) {
    for (Route r : kCandidateRoutes) {
      const double pred = p->PredictUs(c.features, r);
      if (!std::isfinite(pred)) continue;  // route not modelled
      const double e = std::log(pred / c.time(r));
      sq += e * e;
      ++n;
    }
  }
  report->fit_rms_log_error = n > 0 ? std::sqrt(sq / n) : 0;
}

}  // namespace internal

using internal::CheckCells;
using internal::FillReport;
using internal::FitExcept;
using internal::FitFlags;
using internal::LeaveOneOut;
using internal::LooScore;
using internal::SelectByRegret;
using internal::SelectForRoute;
using internal::SelectMargin;
using internal::SelectPerRouteByRegret;
using internal::Shared;
using internal::WithOneFirst;

absl::StatusOr<CostModel> FitCostModelWith(const std::vector<CellTimes>& cells,
                                           std::vector<Input> inputs, double ridge,
                                           const SplitParams& split) {
  PKV_RETURN_IF_ERROR(CheckCells(cells));
  PKV_RETURN_IF_ERROR(internal::CheckLengthShape(cells, {inputs}));
  return FitExcept(cells, Shared(WithOneFirst(std::move(inputs)), {}), ridge, -1, split,
                   FitFlags{});
}

absl::StatusOr<CostModel> FitCostModel(const std::vector<CellTimes>& cells,
                                       const CostFitOptions& options, CostFitReport* report) {
  PKV_RETURN_IF_ERROR(CheckCells(cells));
  {
    std::vector<std::vector<Input>> lists = {options.base, options.candidates};
    for (const std::vector<Input>& r : options.route_base) lists.push_back(r);
    PKV_RETURN_IF_ERROR(internal::CheckLengthShape(cells, lists));
  }
  const std::vector<double> ridges =
      options.ridges.empty() ? std::vector<double>{0.0} : options.ridges;
  CostFitOptions opt = options;
  opt.ridges = ridges;
  FitFlags flags{opt.drop_never_best, opt.min_best_lead, opt.clamp_inputs, 0.0};
  std::array<std::vector<Input>, decode::kNumRoutes> in =
      Shared(WithOneFirst(opt.base), opt.route_base);
  double ridge = ridges.front();
  LooScore loo;
  if (cells.size() >= 4 && opt.selection == InputSelection::kRegret) {
    std::vector<Input> chosen = WithOneFirst(opt.base);
    PKV_RETURN_IF_ERROR(SelectByRegret(cells, opt, flags, &chosen, &ridge, &loo));
    in = Shared(chosen, opt.route_base);
  } else if (cells.size() >= 4 && opt.selection == InputSelection::kRegretPerRoute) {
    PKV_RETURN_IF_ERROR(SelectPerRouteByRegret(cells, opt, flags, &in, &ridge, &loo));
  } else if (cells.size() >= 4) {
    for (Route r : kCandidateRoutes) {
      PKV_ASSIGN_OR_RETURN(in[static_cast<int>(r)], SelectForRoute(cells, opt, ridge, r));
    }
    PKV_ASSIGN_OR_RETURN(loo, LeaveOneOut(cells, in, ridge, flags));
  }
  if (cells.size() >= 4 && opt.margins.size() > 1) {
    PKV_RETURN_IF_ERROR(SelectMargin(cells, opt, in, ridge, &flags, &loo));
  } else if (!opt.margins.empty()) {
    flags.margin = opt.margins.front();
  }
  PKV_ASSIGN_OR_RETURN(CostModel m, FitExcept(cells, in, ridge, -1, opt.split, flags));
  FillReport(cells, m, loo, report);
  return m;
}

}  // namespace pkv::policy
