// Cross-validation of the cost-model fit (bench/policy/cross_validation.h): fold helpers group
// cells as documented; a cell is always scored by a model fitted without it (a route that wins
// only on the left-out cell is never chosen for it); planted exact data cross-validates to
// regret 1; only cells of the requested SM count are scored; malformed folds are rejected.
#include "bench/policy/cross_validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

using decode::Route;

CellTimes Cell(const std::string& name, int32_t sm, std::mt19937& rng) {
  CellTimes c;
  c.cell = name;
  c.sm_count = sm;
  c.features = testing::RandomBatch(rng, sm);
  return c;
}

// Times ln t_r = a_r + b_r * log_bytes_per_slot exactly, for random a_r, b_r (split's: fused's
// where it cannot cut).
std::vector<CellTimes> PlantedCells(std::mt19937& rng, int n) {
  std::normal_distribution<double> nd(0.0, 0.4);
  std::array<double, decode::kNumRoutes> a{}, b{};
  for (Route r : kCandidateRoutes) {
    a[static_cast<int>(r)] = 3.0 + nd(rng);
    b[static_cast<int>(r)] = 1.0 + nd(rng);
  }
  std::vector<CellTimes> cells;
  for (int i = 0; i < n; ++i) {
    CellTimes c = Cell("planted-" + std::to_string(i), 132, rng);
    const double u = ComputeInputs(c.features)[static_cast<int>(Input::kLogBytesPerSlot)];
    for (Route r : kCandidateRoutes) {
      c.gpu_us[static_cast<int>(r)] = std::exp(a[static_cast<int>(r)] + b[static_cast<int>(r)] * u);
    }
    // As on a GPU: split plans as fused on a batch it cannot cut (features.h).
    if (!SplitRouteCuts(c.features)) {
      c.gpu_us[static_cast<int>(Route::kSplit)] = c.gpu_us[static_cast<int>(Route::kFused)];
    }
    cells.push_back(c);
  }
  return cells;
}

TEST(CrossValidationTest, FoldsGroupAsDocumented) {
  std::mt19937 rng(3);
  const std::vector<CellTimes> cells = {
      Cell("zipf-B8", 132, rng), Cell("bucketed-B1-N1024", 132, rng), Cell("zipf-B16", 132, rng),
      Cell("zipf-B8", 66, rng), Cell("uniform-B2", 66, rng)};
  const std::vector<int> kinds = KindFolds(cells);
  EXPECT_EQ(kinds, (std::vector<int>{0, 1, 0, 0, 2}));
  const std::vector<int> names = CellNameFolds(cells);
  EXPECT_EQ(names[0], names[3]);  // the same trace line at two SM counts
  EXPECT_EQ(std::set<int>(names.begin(), names.end()).size(), 4u);
  EXPECT_EQ(LeaveOneOutFolds(3), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(LeaveOneOutFolds(0).empty());
}

TEST(CrossValidationTest, PlantedExactDataCrossValidatesToRegretOne) {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 3; ++trial) {
    const std::vector<CellTimes> cells = PlantedCells(rng, 24);
    CostFitOptions opt;
    opt.route_base = {};
    opt.drop_never_best = false;
    opt.clamp_inputs = false;
    opt.ridges = {0.0};
    absl::StatusOr<CvReport> cv =
        CrossValidateFit(cells, opt, LeaveOneOutFolds(static_cast<int>(cells.size())));
    ASSERT_TRUE(cv.ok()) << cv.status();
    EXPECT_EQ(cv->cells, 24);
    EXPECT_EQ(cv->folds, 24);
    EXPECT_NEAR(cv->gm_regret, 1.0, 1e-9);
    EXPECT_NEAR(cv->worst_regret, 1.0, 1e-9);
  }
}

TEST(CrossValidationTest, EachCellIsScoredByAModelFittedWithoutIt) {
  // Intercept-only models predict each route's mean log time. Persistent takes 200 us on every
  // cell but one random cell, where it takes 0.001 us; workqueue always 100 us. With that cell in
  // the fit persistent's mean log time is below workqueue's and it is chosen everywhere; without
  // it, it is not. So out of fold: workqueue on that cell (regret 1e5), persistent elsewhere
  // (regret 2). Scoring a cell with a model that saw it would give regret 1 there.
  std::mt19937 rng(8);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<CellTimes> cells = PlantedCells(rng, 5);
    const int odd = std::uniform_int_distribution<int>(0, 4)(rng);
    for (int i = 0; i < 5; ++i) {
      CellTimes& c = cells[i];
      for (Route r : kCandidateRoutes) c.gpu_us[static_cast<int>(r)] = 1e4;
      c.gpu_us[static_cast<int>(Route::kWorkqueue)] = 100.0;
      c.gpu_us[static_cast<int>(Route::kPersistent)] = i == odd ? 1e-3 : 200.0;
    }
    CostFitOptions opt;
    opt.base = {Input::kOne};
    opt.route_base = {};
    opt.candidates = {};
    opt.ridges = {0.0};
    absl::StatusOr<CvReport> cv = CrossValidateFit(cells, opt, LeaveOneOutFolds(5));
    ASSERT_TRUE(cv.ok()) << cv.status();
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(cv->regret[i], i == odd ? 1e5 : 2.0, 1e-6) << i;
    EXPECT_EQ(cv->worst_cell, cells[odd].cell);
    EXPECT_NEAR(std::log(cv->gm_regret), (std::log(1e5) + 4 * std::log(2.0)) / 5, 1e-9);
  }
}

TEST(CrossValidationTest, ScoresOnlyTheRequestedSmCount) {
  std::mt19937 rng(13);
  std::vector<CellTimes> cells = PlantedCells(rng, 16);
  for (int i = 0; i < 16; i += 2) cells[i].sm_count = 66;
  absl::StatusOr<CvReport> cv = CrossValidateFit(cells, {}, LeaveOneOutFolds(16), 66);
  ASSERT_TRUE(cv.ok()) << cv.status();
  EXPECT_EQ(cv->cells, 8);
  for (int i = 1; i < 16; i += 2) EXPECT_EQ(cv->regret[i], 1.0);  // unscored
}

TEST(CrossValidationTest, MalformedFoldsAreInvalidArgument) {
  std::mt19937 rng(2);
  const std::vector<CellTimes> cells = PlantedCells(rng, 6);
  EXPECT_EQ(CrossValidateFit(cells, {}, LeaveOneOutFolds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CrossValidateFit(cells, {}, std::vector<int>(6, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);  // one fold holds every cell
}

}  // namespace
}  // namespace pkv::policy
