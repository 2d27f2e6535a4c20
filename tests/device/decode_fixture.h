// The fixture of the decode device tests (decode_attention_test, decode_fp8_test): a seeded
// generator, a stream, and runs of a Case on every route checked against the CPU reference (and,
// for FP8 KV, also against the unquantized reference within Fp8BoundFor). Needs a GPU.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/decode/decode_launch.h"
#include "tests/device/decode_harness.h"

namespace pkv::decode::testing {

// Accuracy bound against unquantized K/V in [-1, 1) with abs-max scales: E4M3 keeps 3 mantissa
// bits (relative error <= 2^-4 per element), E5M2 2 bits (<= 2^-3). The output is a convex
// combination of V rows, so V's error moves it by at most that much of max|v| = 1; K's error moves
// the scores by ~scale * sqrt(D) * 2^-5 on random data, a few percent of the weights. Bounds:
// outputs within 0.07 (E4M3) / 0.14 (E5M2) absolute, LSEs within 0.05 / 0.1.
struct Fp8Bound {
  double out;
  double lse;
};
inline Fp8Bound Fp8BoundFor(KvCacheDtype kv) {
  return kv == KvCacheDtype::kFp8E4M3 ? Fp8Bound{0.07, 0.05} : Fp8Bound{0.14, 0.1};
}

inline constexpr MergeMode kMerges[] = {MergeMode::kInKernel, MergeMode::kSeparate};

class DecodeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override { cudaStreamDestroy(stream_); }

  std::vector<int32_t> RandomLengths(int rows, int lo, int hi) {
    std::vector<int32_t> l(rows);
    for (auto& x : l) x = std::uniform_int_distribution<int>(lo, hi)(rng_);
    return l;
  }

  // Runs `c` on `prob` and checks it against the reference.
  void RunAndCompare(const Case& c, DecodeProblem& prob) {
    SCOPED_TRACE(absl::StrCat(c.Name(), " seed ", seed_));
    ASSERT_TRUE(ConfigureDecodeKernels(c.config).ok());
    std::vector<uint16_t> out;
    std::vector<float> lse;
    const absl::Status st = prob.Run(c, stream_, &out, &lse);
    ASSERT_TRUE(st.ok()) << st.message();
    const CompareResult r = prob.Compare(out, lse);
    EXPECT_EQ(r.bad, 0) << r.bad << " of " << r.checked << " outputs off; " << r.first_bad;
    EXPECT_EQ(r.bad_lse, 0) << r.first_bad;
    if (IsFp8(c.kv_dtype)) {
      const Fp8Bound b = Fp8BoundFor(c.kv_dtype);
      const CompareResult u = prob.CompareUnquantized(out, lse, b.out, b.lse);
      EXPECT_EQ(u.bad, 0) << u.bad << " of " << u.checked << " outputs beyond the FP8 bound (max "
                          << "error " << u.max_err << "); " << u.first_bad;
      EXPECT_EQ(u.bad_lse, 0) << u.first_bad;
    }
  }

  // Every route and merge mode on one random problem.
  void CheckAllRoutes(Case c) {
    DecodeProblem prob(c, rng_);
    for (int r = 0; r < kNumRoutes; ++r) {
      for (MergeMode m : kMerges) {
        c.route = static_cast<Route>(r);
        c.merge = m;
        RunAndCompare(c, prob);
        if (HasFatalFailure()) return;
      }
    }
  }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace pkv::decode::testing
