// Policy v3 length shape (features.h: BatchFeatures::long_rows / long_tokens, inputs long_frac
// and long_token_frac): a hand-made batch, random batches against a direct count, and the
// bimodal-vs-zipf case it exists for (same summary, different shape).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/policy/features.h"

namespace pkv::policy {
namespace {

const KvShape kShape{32, 8, 128, 16};
const decode::DeviceLimits kLimits{132, 2};

double InputOf(const BatchFeatures& f, Input in) { return ComputeInputs(f)[static_cast<int>(in)]; }

TEST(LengthShapeTest, HandMadeBatch) {
  // max 1000: rows longer than 500 are 1000, 600 and 501 (500 itself is not longer than half).
  const std::vector<int32_t> len = {1000, 10, 600, 500, 0, 501, 20, 369};
  const BatchFeatures f = SummarizeBatch(len.data(), 8, kShape, kLimits);
  ASSERT_TRUE(f.has_length_shape());
  EXPECT_EQ(f.long_rows, 3);
  EXPECT_EQ(f.long_tokens, 2101);
  EXPECT_DOUBLE_EQ(InputOf(f, Input::kLongFrac), 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(InputOf(f, Input::kLongTokenFrac), 2101.0 / 3000.0);
}

TEST(LengthShapeTest, EvenAndEmptyBatches) {
  const std::vector<int32_t> even(16, 4096);
  const BatchFeatures e = SummarizeBatch(even.data(), 16, kShape, kLimits);
  EXPECT_EQ(e.long_rows, 16);
  EXPECT_DOUBLE_EQ(InputOf(e, Input::kLongFrac), 1.0);
  EXPECT_DOUBLE_EQ(InputOf(e, Input::kLongTokenFrac), 1.0);
  const std::vector<int32_t> zeros(5, 0);
  const BatchFeatures z = SummarizeBatch(zeros.data(), 5, kShape, kLimits);
  EXPECT_EQ(z.long_rows, 0);
  EXPECT_EQ(InputOf(z, Input::kLongTokenFrac), 0.0);
  const BatchFeatures none = SummarizeBatch(nullptr, 0, kShape, kLimits);
  EXPECT_EQ(none.long_rows, 0);
  EXPECT_EQ(InputOf(none, Input::kLongFrac), 0.0);
}

TEST(LengthShapeTest, RandomBatchesMatchADirectCount) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    const int rows = std::uniform_int_distribution<int>(1, 200)(rng);
    const int hi = std::uniform_int_distribution<int>(1, 40000)(rng);
    std::vector<int32_t> len(rows);
    for (int32_t& l : len) l = std::uniform_int_distribution<int>(0, hi)(rng);
    int32_t max_len = 0;
    for (int32_t l : len) max_len = std::max(max_len, l);
    int n = 0;
    int64_t tokens = 0, all = 0;
    for (int32_t l : len) {
      all += l;
      if (l > max_len / 2.0) {
        ++n;
        tokens += l;
      }
    }
    const BatchFeatures f = SummarizeBatch(len.data(), rows, kShape, kLimits);
    ASSERT_EQ(f.long_rows, n);
    ASSERT_EQ(f.long_tokens, tokens);
    if (all > 0) {
      EXPECT_NEAR(InputOf(f, Input::kLongTokenFrac), static_cast<double>(tokens) / all, 1e-12);
    }
  }
}

// Bimodal (a quarter of the rows long) and zipf-like (one long row) batches with the same batch,
// total tokens and max: the summary's mean/max agrees, the length shape does not.
TEST(LengthShapeTest, SeparatesABlockOfLongRowsFromOneLongRow) {
  std::vector<int32_t> bimodal(16, 100), zipf(16, 0);
  for (int r = 0; r < 4; ++r) bimodal[r] = 20000;  // 4 x 20000 + 12 x 100 = 81200
  zipf[0] = 20000;
  for (int r = 1; r < 16; ++r) zipf[r] = 4080;  // 20000 + 15 x 4080 = 81200, all below 10000
  const BatchFeatures b = SummarizeBatch(bimodal.data(), 16, kShape, kLimits);
  const BatchFeatures z = SummarizeBatch(zipf.data(), 16, kShape, kLimits);
  ASSERT_EQ(b.total_kv_bytes, z.total_kv_bytes);
  ASSERT_EQ(b.max_len, z.max_len);
  EXPECT_DOUBLE_EQ(InputOf(b, Input::kMeanOverMax), InputOf(z, Input::kMeanOverMax));
  EXPECT_DOUBLE_EQ(InputOf(b, Input::kLongFrac), 0.25);
  EXPECT_DOUBLE_EQ(InputOf(z, Input::kLongFrac), 1.0 / 16);
  EXPECT_GT(InputOf(b, Input::kLongTokenFrac), 0.9);
  EXPECT_LT(InputOf(z, Input::kLongTokenFrac), 0.25);
}

// Features rebuilt from PlanFeatures carry no length shape; the inputs are then 0, never NaN.
TEST(LengthShapeTest, UnknownShapeGivesZeroInputs) {
  decode::PlanFeatures pf;
  pf.batch = 4;
  pf.total_kv_bytes = 4096 * 4 * 8 * 128 * 4;
  pf.max_len = pf.min_len = 4096;
  pf.mean_len = 4096;
  const BatchFeatures f = FromPlanFeatures(pf, kShape, kLimits);
  EXPECT_FALSE(f.has_length_shape());
  EXPECT_EQ(InputOf(f, Input::kLongFrac), 0.0);
  EXPECT_EQ(InputOf(f, Input::kLongTokenFrac), 0.0);
  EXPECT_TRUE(ParseInput("long_frac").ok());
  EXPECT_EQ(*ParseInput("long_token_frac"), Input::kLongTokenFrac);
}

}  // namespace
}  // namespace pkv::policy
