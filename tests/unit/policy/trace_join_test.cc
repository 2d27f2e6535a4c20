// Trace-join loader (bench/policy/trace_join.h): the recorded calibration rows join their trace
// grid with features reproduced to the TSV's precision; synthetic sweeps printed as pkv-bench
// kernels prints them join too; a missing name, a wrong trace and malformed lines are errors.
#include "bench/policy/trace_join.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/policy/cost_model.h"
#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

TEST(TraceJoinTest, RecordedCalibrationRowsJoinTheirTraceGrid) {
  std::vector<CellTimes> cells = testing::LoadFixture("calibration_132sm.tsv");
  ASSERT_EQ(cells.size(), 42u);
  absl::StatusOr<TraceLengths> traces =
      ReadTraceLengths(testing::FixturePath("trace_calibration-20260622.tsv"));
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_TRUE(AttachLengthShape(*traces, {}, &cells).ok());
  for (const CellTimes& c : cells) {
    ASSERT_TRUE(c.features.has_length_shape()) << c.cell;
    const std::vector<int32_t>& len = traces->at(c.cell);
    int n = 0;
    for (int32_t l : len) n += 2 * l > c.features.max_len;
    EXPECT_EQ(c.features.long_rows, n) << c.cell;
  }
}

// A sweep TSV of random cells, features printed with pkv-bench kernels' precision.
struct Synthetic {
  std::string sweep, trace;
};
Synthetic MakeSynthetic(std::mt19937& rng, int num_cells) {
  Synthetic s;
  s.sweep =
      "trace\troute\tvariant\tgpu_us\tsm_count\tf_batch\tf_total_kv_bytes\tf_max_len\tf_min_len\t"
      "f_mean_len\tf_len_cv\n";
  for (int i = 0; i < num_cells; ++i) {
    const int rows = std::uniform_int_distribution<int>(1, 64)(rng);
    std::vector<int32_t> len(rows);
    for (int32_t& l : len) l = std::uniform_int_distribution<int>(0, 33000)(rng);
    const BatchFeatures f = SummarizeBatch(len.data(), rows, KvShape{32, 8, 128, 16}, {132, 2});
    const std::string name = absl::StrCat("cell-", i);
    absl::StrAppend(&s.trace, name, "\trandom\t", rows, "\t", absl::StrJoin(len, ","), "\n");
    char row[256];
    std::snprintf(row, sizeof(row), "%s\tfused\tw4s3\t10.0\t132\t%d\t%lld\t%d\t%d\t%.1f\t%.4f\n",
                  name.c_str(), f.batch, static_cast<long long>(f.total_kv_bytes), f.max_len,
                  f.min_len, f.mean_len, f.len_cv);
    s.sweep += row;
  }
  return s;
}

TEST(TraceJoinTest, SyntheticSweepsJoinAndFillTheShape) {
  std::mt19937 rng(5);
  const Synthetic s = MakeSynthetic(rng, 50);
  absl::StatusOr<std::vector<CellTimes>> cells = ParseMeasurements(s.sweep, {});
  ASSERT_TRUE(cells.ok()) << cells.status();
  absl::StatusOr<TraceLengths> traces = ParseTraceLengths(s.trace);
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_TRUE(AttachLengthShape(*traces, {}, &*cells).ok());
  for (const CellTimes& c : *cells) {
    const std::vector<int32_t>& len = traces->at(c.cell);
    const BatchFeatures f =
        SummarizeBatch(len.data(), static_cast<int32_t>(len.size()), {32, 8, 128, 16}, {132, 2});
    EXPECT_EQ(c.features.long_rows, f.long_rows);
    EXPECT_EQ(c.features.long_tokens, f.long_tokens);
  }
}

TEST(TraceJoinTest, MissingTraceNameIsNotFoundNamingTheCell) {
  std::mt19937 rng(6);
  const Synthetic s = MakeSynthetic(rng, 5);
  absl::StatusOr<std::vector<CellTimes>> cells = ParseMeasurements(s.sweep, {});
  ASSERT_TRUE(cells.ok());
  absl::StatusOr<TraceLengths> traces = ParseTraceLengths(s.trace);
  ASSERT_TRUE(traces.ok());
  traces->erase("cell-3");
  const absl::Status st = AttachLengthShape(*traces, {}, &*cells);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("cell-3"), absl::string_view::npos) << st;
}

TEST(TraceJoinTest, WrongTraceIsRejected) {
  std::mt19937 rng(8);
  const Synthetic a = MakeSynthetic(rng, 6);
  const Synthetic b = MakeSynthetic(rng, 6);  // same names, other lengths
  absl::StatusOr<std::vector<CellTimes>> cells = ParseMeasurements(a.sweep, {});
  ASSERT_TRUE(cells.ok());
  absl::StatusOr<TraceLengths> traces = ParseTraceLengths(b.trace);
  ASSERT_TRUE(traces.ok());
  const absl::Status st = AttachLengthShape(*traces, {}, &*cells);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("recomputed"), absl::string_view::npos) << st;
}

TEST(TraceJoinTest, MalformedTraceLines) {
  EXPECT_TRUE(ParseTraceLengths("# comment\na\tk\t2\t1,2\n\nb\tk\t0\t\n").ok());
  EXPECT_FALSE(ParseTraceLengths("a\tk\t3\t1,2\n").ok());            // batch disagrees
  EXPECT_FALSE(ParseTraceLengths("a\tk\t2\t1,x\n").ok());            // bad length
  EXPECT_FALSE(ParseTraceLengths("a\tk\t1\t-4\n").ok());             // negative
  EXPECT_FALSE(ParseTraceLengths("a\tk\t1\n").ok());                 // too few fields
  EXPECT_FALSE(ParseTraceLengths("a\tk\t1\t5\na\tk\t1\t6\n").ok());  // repeated name
  EXPECT_EQ(ReadTraceLengths("/nonexistent/trace.tsv").status().code(),
            absl::StatusCode::kNotFound);
}

// A fit that may use a length-shape input refuses cells without it (read without --traces).
TEST(TraceJoinTest, FitWithLengthShapeCandidatesNeedsTheTraces) {
  std::vector<CellTimes> cells = testing::LoadFixture("calibration_132sm.tsv");
  ASSERT_FALSE(cells.empty());
  CostFitOptions opt;
  opt.candidates.push_back(Input::kLongTokenFrac);
  EXPECT_EQ(FitCostModel(cells, opt).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<TraceLengths> traces =
      ReadTraceLengths(testing::FixturePath("trace_calibration-20260622.tsv"));
  ASSERT_TRUE(traces.ok());
  ASSERT_TRUE(AttachLengthShape(*traces, {}, &cells).ok());
  EXPECT_TRUE(FitCostModel(cells, opt).ok());
}

}  // namespace
}  // namespace pkv::policy
