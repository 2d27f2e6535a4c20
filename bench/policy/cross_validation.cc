#include "bench/policy/cross_validation.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::policy {

std::vector<int> LeaveOneOutFolds(int num_cells) {
  std::vector<int> folds(std::max(num_cells, 0));
  for (int i = 0; i < num_cells; ++i) folds[i] = i;
  return folds;
}

namespace {

std::vector<int> FoldsByKey(const std::vector<CellTimes>& cells, bool kind_only) {
  std::map<std::string, int> ids;
  std::vector<int> folds;
  folds.reserve(cells.size());
  for (const CellTimes& c : cells) {
    const std::string key = kind_only ? c.cell.substr(0, c.cell.find('-')) : c.cell;
    auto it = ids.emplace(key, static_cast<int>(ids.size())).first;
    folds.push_back(it->second);
  }
  return folds;
}

}  // namespace

std::vector<int> KindFolds(const std::vector<CellTimes>& cells) { return FoldsByKey(cells, true); }

std::vector<int> CellNameFolds(const std::vector<CellTimes>& cells) {
  return FoldsByKey(cells, false);
}

absl::StatusOr<CvReport> CrossValidateFit(const std::vector<CellTimes>& cells,
                                          const CostFitOptions& options,
                                          const std::vector<int>& fold_of, int32_t score_sm_count) {
  if (fold_of.size() != cells.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cross-validation: ", fold_of.size(),
                                                   " fold ids for ", cells.size(), " cells"));
  }
  std::vector<int> folds = fold_of;
  std::sort(folds.begin(), folds.end());
  folds.erase(std::unique(folds.begin(), folds.end()), folds.end());
  CvReport report;
  report.folds = static_cast<int>(folds.size());
  report.regret.assign(cells.size(), 1.0);
  double sum_log = 0;
  auto scored = [&](size_t i) {
    return score_sm_count == 0 || cells[i].sm_count == score_sm_count;
  };
  for (int fold : folds) {
    bool any = false;
    for (size_t i = 0; i < cells.size(); ++i) any = any || (fold_of[i] == fold && scored(i));
    if (!any) continue;  // nothing to score: skip the fit
    std::vector<CellTimes> train;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (fold_of[i] != fold) train.push_back(cells[i]);
    }
    if (train.empty()) {
      return absl::InvalidArgumentError("cross-validation: a fold holds every cell");
    }
    PKV_ASSIGN_OR_RETURN(CostModel m, FitCostModel(train, options));
    PKV_ASSIGN_OR_RETURN(CostModelPolicy p, CostModelPolicy::Create(m));
    for (size_t i = 0; i < cells.size(); ++i) {
      if (fold_of[i] != fold || !scored(i)) continue;
      ++report.cells;
      const CellTimes& c = cells[i];
      const double chosen = c.time(p.Choose(c.features).route);
      const double regret = chosen / c.best_us();
      report.regret[i] = regret;
      sum_log += std::log(regret);
      if (report.worst_cell.empty() || regret > report.worst_regret) {
        report.worst_regret = regret;
        report.worst_cell = c.cell;
      }
      report.worst_vs_fused =
          std::max(report.worst_vs_fused, chosen / c.time(decode::Route::kFused));
    }
  }
  if (report.cells > 0) report.gm_regret = std::exp(sum_log / report.cells);
  return report;
}

}  // namespace pkv::policy
