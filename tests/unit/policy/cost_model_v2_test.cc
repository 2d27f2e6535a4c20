// Policy v2 additions to the learned cost model (kernels/policy/cost_model.h, policy_file.h):
// per-route input selection by regret finds the one route whose time depends on an input; the
// margin keeps the default route unless another is predicted faster by more than the margin;
// margins are validated; files with a margin are version 2 and round-trip, files without stay
// version 1 and name only the inputs the model uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/policy/cost_model.h"
#include "kernels/policy/policy_file.h"
#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

using decode::Route;

bool Has(const RouteModel& m, Input in) {
  return std::find(m.inputs.begin(), m.inputs.end(), in) != m.inputs.end();
}

// Workqueue and persistent share a random scale; persistent alone also depends on len_cv, so it
// wins the low-spread batches. Fused and split are far slower.
std::vector<CellTimes> LenCvCells(std::mt19937& rng, int n, double* slope) {
  std::normal_distribution<double> nd(0.0, 0.3);
  const double a = 3.0 + nd(rng), b = 1.0 + nd(rng);
  *slope = 0.2 + std::abs(nd(rng));
  std::vector<CellTimes> cells(n);
  for (CellTimes& c : cells) {
    c.features = testing::RandomBatch(rng);
    const ModelInputs x = ComputeInputs(c.features);
    const double wq = a + b * x[static_cast<int>(Input::kLogBytesPerSlot)];
    c.gpu_us[static_cast<int>(Route::kFused)] = std::exp(wq + 3);
    c.gpu_us[static_cast<int>(Route::kSplit)] = std::exp(wq + 2);
    c.gpu_us[static_cast<int>(Route::kWorkqueue)] = std::exp(wq);
    c.gpu_us[static_cast<int>(Route::kPersistent)] =
        std::exp(wq + *slope * (x[static_cast<int>(Input::kLenCv)] - 0.8));
  }
  return cells;
}

TEST(CostModelV2Test, PerRouteRegretSelectionGivesTheInputToTheRouteThatNeedsIt) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 4; ++trial) {
    double slope = 0;
    const std::vector<CellTimes> cells = LenCvCells(rng, 40, &slope);
    CostFitOptions opt;
    opt.selection = InputSelection::kRegretPerRoute;
    opt.route_base = {};
    opt.candidates = {Input::kFill, Input::kLenCv, Input::kLog2Batch, Input::kTailWave};
    opt.ridges = {0.0};
    CostFitReport report;
    absl::StatusOr<CostModel> m = FitCostModel(cells, opt, &report);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(Has(m->routes[static_cast<int>(Route::kPersistent)], Input::kLenCv));
    EXPECT_FALSE(Has(m->routes[static_cast<int>(Route::kWorkqueue)], Input::kLenCv));
    EXPECT_TRUE(m->routes[static_cast<int>(Route::kFused)].empty());  // never fastest
    EXPECT_NEAR(report.loo_gm_regret, 1.0, 1e-9);
    const auto& p = m->routes[static_cast<int>(Route::kPersistent)];
    for (size_t k = 0; k < p.inputs.size(); ++k) {
      if (p.inputs[k] == Input::kLenCv) {
        EXPECT_NEAR(p.coef[k], slope, 1e-6);
      }
    }
  }
}

CostModel TwoRouteModel(double wq_log, double pers_log, Route default_route, double margin) {
  CostModel m;
  m.routes[static_cast<int>(Route::kWorkqueue)] = RouteModel{{Input::kOne}, {wq_log}};
  m.routes[static_cast<int>(Route::kPersistent)] = RouteModel{{Input::kOne}, {pers_log}};
  m.default_route = default_route;
  m.margin = margin;
  return m;
}

TEST(CostModelV2Test, MarginKeepsTheDefaultUnlessAnotherRouteIsFasterByMore) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> gap(-0.1, 0.1), mg(0.0, 0.05);
  for (int i = 0; i < 500; ++i) {
    const double d = gap(rng), margin = mg(rng);  // d: how much faster persistent is predicted
    const Route def = i % 2 == 0 ? Route::kWorkqueue : Route::kPersistent;
    absl::StatusOr<CostModelPolicy> p =
        CostModelPolicy::Create(TwoRouteModel(std::log(100.0), std::log(100.0) - d, def, margin));
    ASSERT_TRUE(p.ok()) << p.status();
    const Route other = def == Route::kWorkqueue ? Route::kPersistent : Route::kWorkqueue;
    const double other_gain = def == Route::kWorkqueue ? d : -d;  // log time the other saves
    const RouteChoice c = p->Choose(testing::RandomBatch(rng));
    EXPECT_EQ(c.route, other_gain > margin ? other : def) << d << " " << margin;
    EXPECT_NEAR(c.predicted_us, p->PredictUs({}, c.route), 1e-9 * c.predicted_us);
  }
}

TEST(CostModelV2Test, CreateValidatesTheMargin) {
  EXPECT_FALSE(CostModelPolicy::Create(TwoRouteModel(1, 1, Route::kWorkqueue, -0.01)).ok());
  EXPECT_FALSE(CostModelPolicy::Create(TwoRouteModel(1, 1, Route::kWorkqueue, NAN)).ok());
  EXPECT_FALSE(CostModelPolicy::Create(TwoRouteModel(1, 1, Route::kSplit, 0.02)).ok());
  EXPECT_TRUE(CostModelPolicy::Create(TwoRouteModel(1, 1, Route::kSplit, 0.0)).ok());
}

TEST(CostModelV2Test, ExactDataSelectsNoMargin) {
  std::mt19937 rng(31);
  double slope = 0;
  const std::vector<CellTimes> cells = LenCvCells(rng, 30, &slope);
  CostFitOptions opt;
  opt.candidates = {Input::kLenCv};
  opt.margins = {0.0, 0.05, 0.2};
  absl::StatusOr<CostModel> m = FitCostModel(cells, opt);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->margin, 0.0);
}

PolicyFile FileWith(const CostModel& m) {
  PolicyFile f;
  f.gpu_name = "NVIDIA H200";
  f.num_sms = 132;
  f.ctas_per_sm = 2;
  f.learned = m;
  f.has_learned = true;
  return f;
}

TEST(CostModelV2Test, MarginFilesAreVersionTwoAndRoundTrip) {
  CostModel m = TwoRouteModel(4.0, 4.1, Route::kPersistent, 0.025);
  m.routes[static_cast<int>(Route::kPersistent)] =
      RouteModel{{Input::kOne, Input::kTailWave}, {4.1, -0.3}};
  m.input_lo[static_cast<int>(Input::kTailWave)] = 0.1;
  m.input_hi[static_cast<int>(Input::kTailWave)] = 0.9;
  const std::string json = PolicyFileToJson(FileWith(m));
  EXPECT_NE(json.find("\"version\": 2"), std::string::npos) << json;
  absl::StatusOr<PolicyFile> g = ParsePolicyFile(json);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->learned.margin, 0.025);
  EXPECT_EQ(g->learned.default_route, Route::kPersistent);
  EXPECT_EQ(g->learned.routes[static_cast<int>(Route::kPersistent)].inputs,
            m.routes[static_cast<int>(Route::kPersistent)].inputs);
  EXPECT_EQ(g->learned.input_hi[static_cast<int>(Input::kTailWave)], 0.9);
  EXPECT_EQ(PolicyFileToJson(*g), json);
  // Without a margin the file stays version 1 and has no margin member.
  const std::string v1 = PolicyFileToJson(FileWith(TwoRouteModel(4.0, 4.1, Route::kWorkqueue, 0)));
  EXPECT_NE(v1.find("\"version\": 1"), std::string::npos);
  EXPECT_EQ(v1.find("margin"), std::string::npos);
}

TEST(CostModelV2Test, FittedFilesNameOnlyTheInputsTheModelUses) {
  const std::vector<CellTimes> cal = testing::LoadFixture("calibration_132sm.tsv");
  ASSERT_FALSE(cal.empty());
  absl::StatusOr<CostModel> m = FitCostModel(cal, {});
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string json = PolicyFileToJson(FileWith(*m));
  for (int k = 0; k < kNumInputs; ++k) {
    bool used = false;
    for (const RouteModel& rm : m->routes) used = used || Has(rm, static_cast<Input>(k));
    const std::string name = absl::StrCat("\"", InputName(static_cast<Input>(k)), "\": [");
    EXPECT_EQ(json.find(name) != std::string::npos, used) << name;
  }
}

}  // namespace
}  // namespace pkv::policy
