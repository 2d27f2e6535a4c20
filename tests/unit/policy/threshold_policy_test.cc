// The threshold policy (kernels/policy/threshold_policy.h): rules are validated, Choose follows
// the (B, N_max) regions, the fit recovers a planted rule exactly and is never beaten by another
// rule of the same shape, and on the recorded H200 grid it beats the paper's hand-set rules.
#include "kernels/policy/threshold_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bench/policy/evaluate.h"
#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

using decode::Route;

BatchFeatures Batch(int32_t b, int32_t max_len) {
  BatchFeatures f;
  f.batch = b;
  f.max_len = max_len;
  f.min_len = max_len / 2;
  f.mean_len = 0.75 * max_len;
  f.total_kv_bytes = int64_t{b} * max_len * 4096;
  f.num_kv_heads = 8;
  f.head_dim = 128;
  f.page_size = 16;
  f.num_sms = 132;
  f.ctas_per_sm = 2;
  return f;
}

TEST(ThresholdPolicyTest, CreateValidatesRules) {
  ThresholdRules r = PaperRules();
  EXPECT_TRUE(ThresholdPolicy::Create(r).ok());
  ThresholdRules bad = r;
  bad.batch_edges = {8, 2};
  EXPECT_FALSE(ThresholdPolicy::Create(bad).ok());
  bad = r;
  bad.batch_edges = {1, 8};
  EXPECT_FALSE(ThresholdPolicy::Create(bad).ok());
  bad = r;
  bad.long_routes.pop_back();
  EXPECT_FALSE(ThresholdPolicy::Create(bad).ok());
  bad = r;
  bad.short_routes[1] = Route::kBucketedExact;
  EXPECT_FALSE(ThresholdPolicy::Create(bad).ok());
  bad = r;
  bad.long_context_tokens = -1;
  EXPECT_FALSE(ThresholdPolicy::Create(bad).ok());
}

TEST(ThresholdPolicyTest, ChooseFollowsTheRegions) {
  ThresholdRules r;
  r.batch_edges = {4, 32};
  r.long_context_tokens = 10000;
  r.short_routes = {Route::kFused, Route::kSplit, Route::kWorkqueue};
  r.long_routes = {Route::kSplit, Route::kWorkqueue, Route::kPersistent};
  absl::StatusOr<ThresholdPolicy> p = ThresholdPolicy::Create(r);
  ASSERT_TRUE(p.ok());
  std::mt19937 rng(2);
  for (int i = 0; i < 1000; ++i) {
    const int32_t b = std::uniform_int_distribution<int>(1, 300)(rng);
    const int32_t n = std::uniform_int_distribution<int>(1, 40000)(rng);
    const int cls = b < 4 ? 0 : (b < 32 ? 1 : 2);
    const Route want = n >= 10000 ? r.long_routes[cls] : r.short_routes[cls];
    EXPECT_EQ(p->Choose(Batch(b, n)).route, want) << b << " " << n;
  }
}

TEST(ThresholdPolicyTest, PaperRulesReadAsThePaperSays) {
  absl::StatusOr<ThresholdPolicy> p = ThresholdPolicy::Create(PaperRules());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Choose(Batch(1, 32768)).route, Route::kSplit);      // B = 1, long context
  EXPECT_EQ(p->Choose(Batch(4, 32768)).route, Route::kFused);      // the B = 4 boundary
  EXPECT_EQ(p->Choose(Batch(8, 32768)).route, Route::kWorkqueue);  // B >= 8, long context
  EXPECT_EQ(p->Choose(Batch(8, 1024)).route, Route::kFused);       // otherwise
}

// Cells on a (B, N) grid whose fastest route is given by `truth` (the others 10-40% slower).
std::vector<CellTimes> PlantedCells(const ThresholdPolicy& truth, std::mt19937& rng) {
  std::vector<CellTimes> cells;
  for (int32_t b : {1, 2, 4, 8, 16, 32, 64, 128}) {
    for (int32_t n : {1024, 4096, 9000, 16384, 32768}) {
      CellTimes c;
      c.cell = "B" + std::to_string(b) + "-N" + std::to_string(n);
      c.features = Batch(b, n);
      const Route best = truth.Choose(c.features).route;
      for (Route r : kCandidateRoutes) {
        c.gpu_us[static_cast<int>(r)] =
            100.0 * (r == best ? 1.0 : std::uniform_real_distribution<double>(1.1, 1.4)(rng));
      }
      cells.push_back(c);
    }
  }
  return cells;
}

double GmRegret(const RoutePolicy& p, const std::vector<CellTimes>& cells) {
  absl::StatusOr<std::vector<CellOutcome>> out = EvaluatePolicy(p, cells);
  return out.ok() ? Summarize(*out).gm_regret : INFINITY;
}

TEST(ThresholdPolicyTest, FitRecoversAPlantedRuleAndIsOptimalOverItsShape) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 5; ++trial) {
    ThresholdRules planted;
    planted.batch_edges = {4, 32};
    planted.long_context_tokens = 12000;
    for (int k = 0; k < 3; ++k) {
      planted.short_routes.push_back(kCandidateRoutes[rng() % kNumCandidates]);
      planted.long_routes.push_back(kCandidateRoutes[rng() % kNumCandidates]);
    }
    absl::StatusOr<ThresholdPolicy> truth = ThresholdPolicy::Create(planted);
    ASSERT_TRUE(truth.ok());
    const std::vector<CellTimes> cells = PlantedCells(*truth, rng);
    absl::StatusOr<ThresholdRules> fit = FitThresholdRules(cells, {});
    ASSERT_TRUE(fit.ok()) << fit.status();
    absl::StatusOr<ThresholdPolicy> fitted = ThresholdPolicy::Create(*fit);
    ASSERT_TRUE(fitted.ok());
    const double fitted_gm = GmRegret(*fitted, cells);
    EXPECT_NEAR(fitted_gm, 1.0, 1e-12);
    // No random rule of the same shape does better on these cells.
    const int32_t edges[] = {2, 4, 8, 16, 32, 64, 128};
    for (int i = 0; i < 200; ++i) {
      ThresholdRules other;
      const int a = rng() % 6;
      other.batch_edges = {edges[a], edges[a + 1 + rng() % (6 - a)]};
      other.long_context_tokens = std::uniform_int_distribution<int>(0, 40000)(rng);
      for (int k = 0; k < 3; ++k) {
        other.short_routes.push_back(kCandidateRoutes[rng() % kNumCandidates]);
        other.long_routes.push_back(kCandidateRoutes[rng() % kNumCandidates]);
      }
      absl::StatusOr<ThresholdPolicy> op = ThresholdPolicy::Create(other);
      ASSERT_TRUE(op.ok());
      EXPECT_GE(GmRegret(*op, cells), fitted_gm - 1e-12);
    }
  }
  EXPECT_FALSE(FitThresholdRules({}, {}).ok());
}

TEST(ThresholdPolicyTest, RecordedH200FitBeatsThePapersHandSetRules) {
  const std::vector<CellTimes> cal = testing::LoadFixture("calibration_132sm.tsv");
  const std::vector<CellTimes> held = testing::LoadFixture("heldout_132sm.tsv");
  ASSERT_EQ(cal.size(), 42u);
  ASSERT_EQ(held.size(), 42u);
  absl::StatusOr<ThresholdRules> fit = FitThresholdRules(cal, {});
  ASSERT_TRUE(fit.ok());
  absl::StatusOr<ThresholdPolicy> fitted = ThresholdPolicy::Create(*fit);
  absl::StatusOr<ThresholdPolicy> paper = ThresholdPolicy::Create(PaperRules());
  ASSERT_TRUE(fitted.ok() && paper.ok());
  // The paper's RTX 3060 rules send B = 2..7 and short contexts to the single fused kernel,
  // which starves 132 SMs; the refit thresholds must do far better on unseen data.
  EXPECT_LT(GmRegret(*fitted, held), 1.05);
  EXPECT_GT(GmRegret(*paper, held), 1.5);
}

}  // namespace
}  // namespace pkv::policy
