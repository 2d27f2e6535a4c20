// Start-up policy loading (kernels/policy/policy_loader.h) with a fake calibration runner, and
// the on-start calibration's reduced grid (calibration_grid.h): explicit file, per-GPU file,
// calibrate-and-cache, fallback when calibration fails, kinds; the grid is deterministic, bounded
// and ordered.
#include "kernels/policy/policy_loader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "kernels/policy/calibration_grid.h"
#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

using decode::Route;

const KvShape kShape{32, 8, 128, 16};
const decode::DeviceLimits kLimits{132, 2};

PolicyFile Fitted() {
  PolicyFile f;
  f.gpu_name = "Test GPU";
  f.num_sms = 132;
  f.ctas_per_sm = 2;
  const std::vector<CellTimes> cal = testing::LoadFixture("calibration_132sm.tsv");
  f.threshold = *FitThresholdRules(cal, {});
  f.has_threshold = true;
  f.learned = *FitCostModel(cal, {});
  f.has_learned = true;
  return f;
}

// A fresh empty directory under the test's temp dir.
std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/policy_loader_" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

TEST(PolicyLoaderTest, ExplicitFileWins) {
  const std::string dir = FreshDir("explicit");
  const std::string path = dir + "/mounted.json";
  PolicyFile f = Fitted();
  f.num_sms = 66;  // calibrated elsewhere: used anyway (with a warning)
  ASSERT_TRUE(WritePolicyFile(path, f).ok());
  int calls = 0;
  const CalibrateFn never = [&]() -> absl::StatusOr<PolicyFile> {
    ++calls;
    return absl::InternalError("must not run");
  };
  absl::StatusOr<LoadedPolicy> p =
      LoadPolicyForGpu({path, dir, ""}, "Test GPU", kLimits, kShape, never);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->policy->kind(), "learned");
  EXPECT_NE(p->origin.find(path), std::string::npos);
  p = LoadPolicyForGpu({path, dir, "threshold"}, "Test GPU", kLimits, kShape, never);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->policy->kind(), "threshold");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(LoadPolicyForGpu({dir + "/missing.json", dir, ""}, "Test GPU", kLimits, kShape, never)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  std::FILE* bad = std::fopen(path.c_str(), "w");
  std::fputs("{\"format\": \"pkv-decode-policy\", \"version\": 7}", bad);
  std::fclose(bad);
  EXPECT_EQ(LoadPolicyForGpu({path, dir, ""}, "Test GPU", kLimits, kShape, never).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The on-start calibration is cached per model shape, next to (never over) the fitted file: a
// fitted file for another shape stays, and each shape is calibrated once.
TEST(PolicyLoaderTest, CalibratesOnceAndCachesPerShape) {
  const std::string dir = FreshDir("cache") + "/created/by/the/loader";
  const KvShape other_shape{28, 4, 128, 16};
  KvShape calibrated = kShape;
  int calls = 0;
  const CalibrateFn calibrate = [&]() -> absl::StatusOr<PolicyFile> {
    ++calls;
    PolicyFile f = Fitted();
    f.shape = calibrated;
    return f;
  };
  absl::StatusOr<LoadedPolicy> first =
      LoadPolicyForGpu({"", dir, ""}, "Test GPU", kLimits, kShape, calibrate);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(calls, 1);
  EXPECT_NE(first->origin.find("on-start calibration"), std::string::npos);
  const std::string cache = dir + "/test-gpu-132sm-q32-kv8-d128-p16.json";
  ASSERT_TRUE(ReadPolicyFile(cache).ok());
  absl::StatusOr<LoadedPolicy> second =
      LoadPolicyForGpu({"", dir, ""}, "Test GPU", kLimits, kShape, calibrate);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(calls, 1);  // served from the cache
  EXPECT_NE(second->origin.find(cache), std::string::npos);
  // A fitted file for another shape is used by that shape and survives the first shape's starts.
  PolicyFile fitted = Fitted();
  fitted.shape = other_shape;
  ASSERT_TRUE(WritePolicyFile(dir + "/test-gpu-132sm.json", fitted).ok());
  absl::StatusOr<LoadedPolicy> other =
      LoadPolicyForGpu({"", dir, ""}, "Test GPU", kLimits, other_shape, calibrate);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_NE(other->origin.find("test-gpu-132sm.json"), std::string::npos);
  ASSERT_TRUE(LoadPolicyForGpu({"", dir, ""}, "Test GPU", kLimits, kShape, calibrate).ok());
  EXPECT_EQ(calls, 1);  // still the cache, not the other shape's fitted file
  EXPECT_EQ(ReadPolicyFile(dir + "/test-gpu-132sm.json")->shape.num_q_heads, 28);
  // A third shape calibrates into its own cache.
  calibrated = KvShape{16, 8, 128, 16};
  ASSERT_TRUE(LoadPolicyForGpu({"", dir, ""}, "Test GPU", kLimits, calibrated, calibrate).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(ReadPolicyFile(dir + "/test-gpu-132sm-q16-kv8-d128-p16.json").ok());
  EXPECT_EQ(ReadPolicyFile(dir + "/test-gpu-132sm.json")->shape.num_q_heads, 28);
}

// FP8 pages load <gpu>-<sms>sm-fp8.json, never the 16-bit file; without one LoadStoredPolicy
// says so (the CUDA backend then uses the 16-bit policy on 16-bit-equivalent features).
TEST(PolicyLoaderTest, Fp8PagesUseTheirOwnStoredFile) {
  const std::string dir = FreshDir("fp8");
  KvShape fp8 = kShape;
  fp8.kv_elem_bytes = 1;
  PolicyFile sixteen = Fitted();
  ASSERT_TRUE(WritePolicyFile(dir + "/test-gpu-132sm.json", sixteen).ok());
  absl::StatusOr<std::optional<LoadedPolicy>> none =
      LoadStoredPolicy({"", dir, ""}, "Test GPU", kLimits, fp8);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  PolicyFile f = Fitted();
  f.shape.kv_elem_bytes = 1;
  ASSERT_TRUE(WritePolicyFile(dir + "/test-gpu-132sm-fp8.json", f).ok());
  absl::StatusOr<std::optional<LoadedPolicy>> got =
      LoadStoredPolicy({"", dir, ""}, "Test GPU", kLimits, fp8);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->kv_elem_bytes, 1);
  EXPECT_NE((*got)->origin.find("-fp8.json"), std::string::npos);
  // A 16-bit model is not served the FP8 file, nor an FP8 model a 16-bit file under its name.
  absl::StatusOr<std::optional<LoadedPolicy>> bf16 =
      LoadStoredPolicy({"", dir, ""}, "Test GPU", kLimits, kShape);
  ASSERT_TRUE(bf16.ok() && bf16->has_value());
  EXPECT_EQ((*bf16)->kv_elem_bytes, 2);
  ASSERT_TRUE(WritePolicyFile(dir + "/test-gpu-132sm-fp8.json", sixteen).ok());
  none = LoadStoredPolicy({"", dir, ""}, "Test GPU", kLimits, fp8);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(PolicyLoaderTest, FailedCalibrationFallsBackToTheDefaultRoute) {
  const std::string dir = FreshDir("fallback");
  const CalibrateFn failing = []() -> absl::StatusOr<PolicyFile> {
    return absl::DeadlineExceededError("too slow");
  };
  absl::StatusOr<LoadedPolicy> p =
      LoadPolicyForGpu({"", dir, ""}, "Test GPU", kLimits, kShape, failing);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->policy->kind(), "fixed");
  std::mt19937 rng(1);
  EXPECT_EQ(p->policy->Choose(testing::RandomBatch(rng)).route, decode::PlanOptions{}.route);
  // An unusable cache directory (below a regular file) still yields the calibrated policy.
  const std::string blocker = dir + "/a-file";
  std::FILE* f = std::fopen(blocker.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const CalibrateFn ok = []() -> absl::StatusOr<PolicyFile> { return Fitted(); };
  p = LoadPolicyForGpu({"", blocker + "/cache", ""}, "Test GPU", kLimits, kShape, ok);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->policy->kind(), "learned");
  EXPECT_NE(p->origin.find("not cached"), std::string::npos);
}

TEST(PolicyLoaderTest, KindsAreValidated) {
  const std::string dir = FreshDir("kinds");
  const CalibrateFn none;
  absl::StatusOr<LoadedPolicy> p =
      LoadPolicyForGpu({"", dir, "fixed:persistent"}, "Test GPU", kLimits, kShape, none);
  ASSERT_TRUE(p.ok());
  std::mt19937 rng(2);
  EXPECT_EQ(p->policy->Choose(testing::RandomBatch(rng)).route, Route::kPersistent);
  EXPECT_EQ(p->policy->Choose(testing::RandomBatch(rng)).min_split_tokens, 128);
  p = LoadPolicyForGpu({"", dir, "fixed:split:512"}, "Test GPU", kLimits, kShape, none);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->policy->Choose(testing::RandomBatch(rng)).route, Route::kSplit);
  EXPECT_EQ(p->policy->Choose(testing::RandomBatch(rng)).min_split_tokens, 512);
  EXPECT_FALSE(LoadPolicyForGpu({"", dir, "fixed:turbo"}, "G", kLimits, kShape, none).ok());
  for (const char* bad : {"fixed:split:0", "fixed:split:x", "fixed:split:64:1"}) {
    EXPECT_EQ(LoadPolicyForGpu({"", dir, bad}, "G", kLimits, kShape, none).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(LoadPolicyForGpu({"", dir, "bogus"}, "G", kLimits, kShape, none).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CalibrationGridTest, DeterministicBoundedAndOrdered) {
  const int64_t cap = int64_t{1} << 30;
  const std::vector<GridCell> a = ReducedGrid(kShape, cap, 5);
  const std::vector<GridCell> b = ReducedGrid(kShape, cap, 5);
  const std::vector<GridCell> c = ReducedGrid(kShape, cap, 6);
  ASSERT_EQ(a.size(), 21u);
  std::set<std::string> names;
  bool differs = false;
  const int64_t bytes_per_token = int64_t{8} * 128 * 4;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].lengths, b[i].lengths);
    names.insert(a[i].name);
    int64_t tokens = 0;
    for (int32_t l : a[i].lengths) {
      EXPECT_GE(l, 1);
      tokens += l;
    }
    EXPECT_EQ(a[i].kv_bytes, tokens * bytes_per_token);
    EXPECT_LE(a[i].kv_bytes, cap + static_cast<int64_t>(a[i].lengths.size()) * bytes_per_token);
    if (i > 0) {
      EXPECT_LE(a[i - 1].kv_bytes, a[i].kv_bytes);
    }
    differs = differs || a[i].lengths != c[i].lengths;
  }
  EXPECT_EQ(names.size(), a.size());
  EXPECT_TRUE(differs);  // the seed matters for the random kinds
}

}  // namespace
}  // namespace pkv::policy
