// Honest cross-validation of the whole cost-model fitting procedure (issue 8, policy v2).
//
// FitCostModel selects inputs and ridge by leave-one-out regret on its calibration cells, so the
// leave-one-out regret it reports is the score it was selected on and flatters the model. To
// compare fitting variants (candidate inputs, selection rules) on calibration data alone, the
// whole procedure, selection included, is re-run per fold with the fold's cells left out, and
// the cells of the fold are scored by the model fitted without them:
//   nested leave-one-out  every cell is its own fold;
//   leave-one-kind-out    the cells of one trace distribution ("bucketed", "uniform", ...: the
//                         cell name up to its first '-') form a fold, so a kind never seen in
//                         fitting is predicted: a harder test of extrapolation.
// Nothing here reads a held-out grid; the folds are calibration cells only.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/measurements.h"

namespace pkv::policy {

struct CvReport {
  int cells = 0;
  int folds = 0;
  double gm_regret = 1.0;     // geometric mean over cells of the out-of-fold regret
  double worst_regret = 1.0;  // worst out-of-fold regret
  std::string worst_cell;
  double worst_vs_fused = 0.0;  // worst chosen / fused time out of fold
  std::vector<double> regret;   // [input cells] out-of-fold regret by cell (1 where unscored)
};

// Fold ids: cell i alone (nested leave-one-out).
std::vector<int> LeaveOneOutFolds(int num_cells);
// Fold ids by cell name: one trace line at every SM count it was measured at (for a fit pooled
// over SM partitions, so a batch is never scored by a model that saw it at another SM count).
std::vector<int> CellNameFolds(const std::vector<CellTimes>& cells);
// Fold ids by trace kind (the cell name up to its first '-'), numbered in order of appearance.
std::vector<int> KindFolds(const std::vector<CellTimes>& cells);

// Fits with `options` on the cells outside each fold and scores the fold's cells of SM count
// `score_sm_count` (0: every cell; CvReport::cells counts the scored ones).
// INVALID_ARGUMENT when fold_of does not have one id per cell, or as FitCostModel.
absl::StatusOr<CvReport> CrossValidateFit(const std::vector<CellTimes>& cells,
                                          const CostFitOptions& options,
                                          const std::vector<int>& fold_of,
                                          int32_t score_sm_count = 0);

}  // namespace pkv::policy
