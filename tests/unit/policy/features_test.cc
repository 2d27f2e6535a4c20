// Batch features and model inputs (kernels/policy/features.h): SummarizeBatch agrees with the
// planner's own PlanFeatures on random batches, every input is finite and inside its documented
// bounds for random and degenerate batches, and input names round-trip.
#include "kernels/policy/features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/decode/plan.h"

namespace pkv::policy {
namespace {

std::vector<int32_t> RandomLengths(std::mt19937& rng, int rows) {
  std::vector<int32_t> len(rows);
  const int kind = static_cast<int>(rng() % 3);
  for (int32_t& l : len) {
    l = kind == 0   ? 4096
        : kind == 1 ? std::uniform_int_distribution<int>(0, 40000)(rng)
                    : (rng() % 4 == 0 ? 30000 : std::uniform_int_distribution<int>(1, 600)(rng));
  }
  return len;
}

TEST(FeaturesTest, SummaryMatchesThePlannersFeatures) {
  std::mt19937 rng(7);
  const KvShape shape{32, 8, 128, 16};
  for (int trial = 0; trial < 200; ++trial) {
    const int rows = std::uniform_int_distribution<int>(1, 96)(rng);
    const std::vector<int32_t> len = RandomLengths(rng, rows);
    std::vector<int32_t> indptr(1, 0);
    for (int32_t l : len) indptr.push_back(indptr.back() + (l + 15) / 16);
    const decode::DeviceLimits limits{std::uniform_int_distribution<int>(8, 132)(rng), 2};
    decode::PlanInput in{len.data(), indptr.data(), rows, shape};
    decode::PlanOptions opt;
    opt.route = decode::Route::kFused;
    decode::DecodePlan plan;
    ASSERT_TRUE(decode::PlanDecode(in, limits, opt, &plan).ok());
    const BatchFeatures a = SummarizeBatch(len.data(), rows, shape, limits);
    const BatchFeatures b = FromPlanFeatures(plan.features, shape, limits);
    EXPECT_EQ(a.batch, b.batch);
    EXPECT_EQ(a.total_kv_bytes, b.total_kv_bytes);
    EXPECT_EQ(a.max_len, b.max_len);
    EXPECT_EQ(a.min_len, b.min_len);
    EXPECT_DOUBLE_EQ(a.mean_len, b.mean_len);
    EXPECT_DOUBLE_EQ(a.len_cv, b.len_cv);
    EXPECT_EQ(a.num_sms, limits.num_sms);
    EXPECT_EQ(a.ctas_per_sm, 2);
    // Bytes from first principles: K and V, 2-byte elements, every kv head.
    int64_t tokens = 0;
    for (int32_t l : len) tokens += l;
    EXPECT_EQ(a.total_kv_bytes, tokens * 8 * 128 * 2 * 2);
  }
}

void ExpectInputsInBounds(const BatchFeatures& f) {
  const ModelInputs x = ComputeInputs(f);
  for (int k = 0; k < kNumInputs; ++k) {
    ASSERT_TRUE(std::isfinite(x[k])) << InputName(static_cast<Input>(k));
  }
  EXPECT_EQ(x[static_cast<int>(Input::kOne)], 1.0);
  const double u = x[static_cast<int>(Input::kLogBytesPerSlot)];
  EXPECT_GE(u, 0.0);
  EXPECT_DOUBLE_EQ(x[static_cast<int>(Input::kLogBytesPerSlotSq)], u * u);
  EXPECT_GE(x[static_cast<int>(Input::kLogWqImbalance)], 0.0);
  EXPECT_GE(x[static_cast<int>(Input::kLogFusedImbalance)], 0.0);
  EXPECT_GE(x[static_cast<int>(Input::kFill)], 0.0);
  EXPECT_LE(x[static_cast<int>(Input::kFill)], 4.0);
  EXPECT_GE(x[static_cast<int>(Input::kLenCv)], 0.0);
  EXPECT_LE(x[static_cast<int>(Input::kLenCv)], 4.0);
  EXPECT_GE(x[static_cast<int>(Input::kMeanOverMax)], 0.0);
  EXPECT_LE(x[static_cast<int>(Input::kMeanOverMax)], 1.0);
  EXPECT_GE(x[static_cast<int>(Input::kLog2Batch)], 0.0);
  EXPECT_GE(x[static_cast<int>(Input::kLogPairMiB)], 0.0);
  // Policy v2 inputs.
  EXPECT_GE(x[static_cast<int>(Input::kLogFill)], -8.0);
  EXPECT_LE(x[static_cast<int>(Input::kLogFill)], 4.0);
  EXPECT_GT(x[static_cast<int>(Input::kTailWave)], 0.0);
  EXPECT_LE(x[static_cast<int>(Input::kTailWave)], 1.0);
  EXPECT_GE(x[static_cast<int>(Input::kLogMeanLen)], 0.0);
  EXPECT_GE(x[static_cast<int>(Input::kLogMaxOverMin)], 0.0);
  EXPECT_LE(x[static_cast<int>(Input::kLogMaxOverMin)], 12.0);
  // Policy v3 (length shape) inputs: shares.
  for (Input in : {Input::kLongFrac, Input::kLongTokenFrac}) {
    EXPECT_GE(x[static_cast<int>(in)], 0.0) << InputName(in);
    EXPECT_LE(x[static_cast<int>(in)], 1.0) << InputName(in);
  }
  // Without v2 the version-1 and v3 inputs are the same and the v2 ones are left 0.
  const ModelInputs v1 = ComputeInputs(f, /*v2=*/false);
  for (int k = 0; k < kNumInputs; ++k) {
    if (k < static_cast<int>(kFirstV2Input) || k >= static_cast<int>(kFirstV3Input)) {
      EXPECT_EQ(v1[k], x[k]) << InputName(static_cast<Input>(k));
    } else {
      EXPECT_EQ(v1[k], 0.0) << InputName(static_cast<Input>(k));
    }
  }
}

TEST(FeaturesTest, InputsAreFiniteAndBoundedOnRandomBatches) {
  std::mt19937 rng(11);
  const KvShape shape{28, 4, 128, 16};
  for (int trial = 0; trial < 500; ++trial) {
    const int rows = std::uniform_int_distribution<int>(1, 256)(rng);
    const std::vector<int32_t> len = RandomLengths(rng, rows);
    const decode::DeviceLimits limits{std::uniform_int_distribution<int>(1, 200)(rng),
                                      std::uniform_int_distribution<int>(1, 4)(rng)};
    ExpectInputsInBounds(SummarizeBatch(len.data(), rows, shape, limits));
  }
}

TEST(FeaturesTest, DegenerateBatchesGiveFiniteInputs) {
  const KvShape shape{32, 8, 128, 16};
  const decode::DeviceLimits limits{132, 2};
  ExpectInputsInBounds(SummarizeBatch(nullptr, 0, shape, limits));  // empty batch
  const std::vector<int32_t> zeros(17, 0);
  ExpectInputsInBounds(SummarizeBatch(zeros.data(), 17, shape, limits));
  const std::vector<int32_t> one = {1};
  ExpectInputsInBounds(SummarizeBatch(one.data(), 1, shape, limits));
  BatchFeatures f;  // all zero: no SMs, no heads
  ExpectInputsInBounds(f);
}

TEST(FeaturesTest, WorkqueueImbalanceSeesUnsplittableLongRows) {
  // 128 rows on 264 slots leave 4 spare items per kv head for splitting: a batch with a few
  // rows 64x longer than the rest is imbalanced; the same bytes spread evenly are not.
  const KvShape shape{32, 8, 128, 16};
  const decode::DeviceLimits limits{132, 2};
  std::vector<int32_t> ragged(128, 512), even(128, 0);
  for (int i = 0; i < 4; ++i) ragged[i * 32] = 32768;
  int64_t total = 0;
  for (int32_t l : ragged) total += l;
  for (int32_t& l : even) l = static_cast<int32_t>(total / 128);
  const ModelInputs xr = ComputeInputs(SummarizeBatch(ragged.data(), 128, shape, limits));
  const ModelInputs xe = ComputeInputs(SummarizeBatch(even.data(), 128, shape, limits));
  EXPECT_GT(xr[static_cast<int>(Input::kLogWqImbalance)], 0.5);
  EXPECT_EQ(xe[static_cast<int>(Input::kLogWqImbalance)], 0.0);
  // With 8 rows there is room to split the long rows: no imbalance.
  const ModelInputs xs = ComputeInputs(SummarizeBatch(ragged.data(), 8, shape, limits));
  EXPECT_EQ(xs[static_cast<int>(Input::kLogWqImbalance)], 0.0);
}

TEST(FeaturesTest, WaveInputsFollowTheCountOfPairsAndSlots) {
  // Integer arithmetic on random batches, independent of the floating-point code: pairs = B x
  // H_kv run in ceil(pairs / slots) waves, the last one `pairs - (waves - 1) * slots` busy.
  std::mt19937 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    const int rows = std::uniform_int_distribution<int>(1, 300)(rng);
    const int hkv = 1 << std::uniform_int_distribution<int>(0, 4)(rng);
    const KvShape shape{hkv * 4, hkv, 128, 16};
    const decode::DeviceLimits limits{std::uniform_int_distribution<int>(1, 140)(rng),
                                      std::uniform_int_distribution<int>(1, 4)(rng)};
    const std::vector<int32_t> len = RandomLengths(rng, rows);
    const ModelInputs x = ComputeInputs(SummarizeBatch(len.data(), rows, shape, limits));
    const int64_t pairs = int64_t{rows} * hkv, slots = int64_t{limits.num_sms} * limits.ctas_per_sm;
    const int64_t waves = (pairs + slots - 1) / slots;
    const double busy = static_cast<double>(pairs - (waves - 1) * slots) / slots;
    EXPECT_NEAR(x[static_cast<int>(Input::kTailWave)], busy, 1e-9) << rows << " " << slots;
    const double fill = static_cast<double>(pairs) / slots;
    EXPECT_NEAR(x[static_cast<int>(Input::kLogFill)], std::clamp(std::log(fill), -8.0, 4.0), 1e-12);
    int32_t mx = 0, mn = len[0];
    for (int32_t l : len) mx = std::max(mx, l), mn = std::min(mn, l);
    EXPECT_NEAR(x[static_cast<int>(Input::kLogMaxOverMin)],
                std::min(12.0, std::log((1.0 + mx) / (1.0 + mn))), 1e-12);
    EXPECT_NEAR(x[static_cast<int>(Input::kLogSlots)], std::log(slots / 264.0), 1e-12);
  }
}

TEST(FeaturesTest, InputNamesRoundTrip) {
  for (int k = 0; k < kNumInputs; ++k) {
    const Input in = static_cast<Input>(k);
    absl::StatusOr<Input> parsed = ParseInput(InputName(in));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, in);
  }
  EXPECT_EQ(ParseInput("log_bytes").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv::policy
