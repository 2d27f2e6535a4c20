// Measurement TSVs and evaluation (bench/policy/measurements_tsv.h, evaluate.h): the recorded
// fixtures parse into complete cells with the right features, bad rows are INVALID_ARGUMENT with
// the line, filters work, and the evaluation summary matches a direct computation.
#include "kernels/policy/measurements.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "bench/policy/evaluate.h"
#include "bench/policy/measurements_tsv.h"
#include "kernels/policy/route_policy.h"
#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

using decode::Route;

const char kHeader[] =
    "trace\tkind\tbatch\troute\tvariant\tgpu_us\tsm_count\tf_batch\tf_total_kv_bytes\tf_max_len\t"
    "f_min_len\tf_mean_len\tf_len_cv\n";

std::string Row(const std::string& trace, const std::string& route, const std::string& variant,
                const std::string& us, int sm) {
  return trace + "\tk\t2\t" + route + "\t" + variant + "\t" + us + "\t" + std::to_string(sm) +
         "\t2\t8192\t1\t1\t1.0\t0.0\n";
}

TEST(MeasurementsTest, FixturesParseIntoCompleteCells) {
  const std::vector<CellTimes> cells = testing::LoadFixture("calibration_132sm.tsv");
  ASSERT_EQ(cells.size(), 42u);
  for (const CellTimes& c : cells) {
    EXPECT_TRUE(c.complete()) << c.cell;
    EXPECT_EQ(c.sm_count, 132);
    EXPECT_EQ(c.features.num_sms, 132);
    EXPECT_EQ(c.features.ctas_per_sm, 2);
    EXPECT_EQ(c.features.num_kv_heads, 8);
    EXPECT_GT(c.features.total_kv_bytes, 0);
    EXPECT_FALSE(c.has(Route::kBucketedExact));
  }
  // bucketed-B4-N16384: 4 rows of 16384 tokens, 8 kv heads x 128 dims x K,V x 2 bytes.
  const CellTimes* b4 = nullptr;
  for (const CellTimes& c : cells) b4 = c.cell == "bucketed-B4-N16384" ? &c : b4;
  ASSERT_NE(b4, nullptr);
  EXPECT_EQ(b4->features.batch, 4);
  EXPECT_EQ(b4->features.total_kv_bytes, int64_t{4} * 16384 * 8 * 128 * 4);
  EXPECT_EQ(b4->features.max_len, 16384);
  EXPECT_EQ(b4->features.len_cv, 0.0);
}

TEST(MeasurementsTest, BadRowsNameTheLine) {
  const std::string good = std::string(kHeader) + Row("a", "fused", "w4s3", "10.5", 132);
  ASSERT_TRUE(ParseMeasurements(good, {}).ok());
  const struct {
    std::string text, reason;
  } cases[] = {
      {"", "header"},
      {"trace\troute\n", "no column"},
      {std::string(kHeader) + Row("a", "fused", "w4s3", "fast", 132), "line 2"},
      {std::string(kHeader) + Row("a", "fused", "w4s3", "-3", 132), "positive"},
      {std::string(kHeader) + Row("a", "turbo", "w4s3", "3", 132), "turbo"},
      {std::string(kHeader) + "a\tk\t2\n", "line 2"},
      {good + Row("a", "fused", "w4s3", "11", 132), "second time"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<CellTimes>> r = ParseMeasurements(c.text, {});
    ASSERT_FALSE(r.ok()) << c.reason;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(c.reason), std::string::npos) << r.status();
  }
  EXPECT_EQ(ReadMeasurements("/nonexistent/x.tsv", {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MeasurementsTest, FiltersBySmCountAndVariant) {
  std::string text = kHeader;
  for (int sm : {132, 28}) {
    text += Row("a", "fused", "w4s3", "10", sm);
    text += Row("a", "split", "w4s3", "20", sm);
    text += Row("a", "split", "w4s3/2k", "5", sm);  // separate merge launch: skipped by default
  }
  absl::StatusOr<std::vector<CellTimes>> all = ParseMeasurements(text, {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(SmCounts(*all), (std::vector<int32_t>{132, 28}));
  EXPECT_EQ((*all)[0].time(Route::kSplit), 20.0);
  ReadOptions only28;
  only28.sm_count = 28;
  EXPECT_EQ(ParseMeasurements(text, only28)->size(), 1u);
  ReadOptions merge2k;
  merge2k.variant = "w4s3/2k";
  absl::StatusOr<std::vector<CellTimes>> v = ParseMeasurements(text, merge2k);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[0].time(Route::kSplit), 5.0);
  EXPECT_FALSE((*v)[0].has(Route::kFused));
  EXPECT_TRUE(CompleteCells(*all, 132).empty());  // no workqueue / persistent times
}

// FP8 rows ("<config>/fp8_e4m3") are kept only when their KV dtype is selected, and then 16-bit
// rows are not.
TEST(MeasurementsTest, KvDtypeSelectsItsRows) {
  const std::string text = std::string(kHeader) + Row("a", "split", "w4s3", "20", 132) +
                           Row("a", "split", "w8s3/fp8_e4m3", "12", 132) +
                           Row("a", "split", "w8s3/2k/fp8_e4m3", "11", 132);
  ReadOptions sixteen;
  EXPECT_EQ((*ParseMeasurements(text, sixteen))[0].time(Route::kSplit), 20.0);
  ReadOptions fp8;
  ASSERT_TRUE(SelectKvDtype("fp8_e4m3", &fp8).ok());
  EXPECT_EQ(fp8.shape.kv_elem_bytes, 1);
  absl::StatusOr<std::vector<CellTimes>> cells = ParseMeasurements(text, fp8);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->size(), 1u);
  EXPECT_EQ((*cells)[0].time(Route::kSplit), 12.0);
  EXPECT_FALSE(SelectKvDtype("int4", &fp8).ok());
}

TEST(EvaluateTest, SummaryMatchesADirectComputation) {
  std::mt19937 rng(8);
  std::vector<CellTimes> cells(30);
  for (size_t i = 0; i < cells.size(); ++i) {
    cells[i].cell = "c" + std::to_string(i);
    cells[i].features = testing::RandomBatch(rng);
    for (Route r : kCandidateRoutes) {
      cells[i].gpu_us[static_cast<int>(r)] = std::uniform_real_distribution<double>(5, 500)(rng);
    }
  }
  const FixedPolicy policy(Route::kSplit);
  absl::StatusOr<std::vector<CellOutcome>> out = EvaluatePolicy(policy, cells);
  ASSERT_TRUE(out.ok());
  double log_regret = 0, log_speedup = 0, worst = 0, worst_vs_fused = 0;
  int slower = 0;
  for (const CellTimes& c : cells) {
    double best = INFINITY;
    for (Route r : kCandidateRoutes) best = std::min(best, c.time(r));
    const double split = c.time(Route::kSplit), fused = c.time(Route::kFused);
    log_regret += std::log(split / best);
    log_speedup += std::log(fused / split);
    worst = std::max(worst, split / best);
    worst_vs_fused = std::max(worst_vs_fused, split / fused);
    slower += split > 1.03 * fused;
  }
  const EvalSummary s = Summarize(*out);
  EXPECT_EQ(s.cells, 30);
  EXPECT_NEAR(s.gm_regret, std::exp(log_regret / 30), 1e-12);
  EXPECT_NEAR(s.gm_speedup_vs_fused, std::exp(log_speedup / 30), 1e-12);
  EXPECT_DOUBLE_EQ(s.worst_regret, worst);
  EXPECT_DOUBLE_EQ(s.worst_vs_fused, worst_vs_fused);
  EXPECT_EQ(s.slower_than_fused_3pct, slower);
  EXPECT_EQ(s.chosen_count[static_cast<int>(Route::kSplit)], 30);
  cells[3].gpu_us[static_cast<int>(Route::kPersistent)] = std::nan("");
  EXPECT_EQ(EvaluatePolicy(policy, cells).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv::policy
