#include "worker/model/rope.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/harness/test_seed.h"
#include "tests/unit/model/test_model.h"

namespace pkv {
namespace {

ModelConfig Llama31Rope() {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  c.rope_scaling = RopeScaling{"llama3", 8.0f, 1.0f, 4.0f, 8192};
  return c;
}

// (e) Llama-3 frequency scaling against the transformers formula, on the real Llama-3.1 shape
// and on the tiny test shape; every band (unchanged, divided, smoothed) must be exercised.
TEST(RopeTest, Llama3ScalingMatchesDirectFormula) {
  for (const ModelConfig& c : {Llama31Rope(), testing::TinyConfig("llama3")}) {
    const std::vector<double> got = RopeInvFrequencies(c);
    const std::vector<double> want = testing::DirectRopeFrequencies(c);
    ASSERT_EQ(got.size(), static_cast<size_t>(c.head_dim / 2));
    int unchanged = 0, divided = 0, smoothed = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-12 * want[i]) << i;
      const double base = std::pow(double{c.rope_theta}, -2.0 * i / c.head_dim);
      if (std::abs(got[i] - base) <= 1e-12 * base) {
        ++unchanged;
      } else if (std::abs(got[i] - base / 8) <= 1e-12 * base) {
        ++divided;
      } else {
        EXPECT_GT(got[i], base / 8);
        EXPECT_LT(got[i], base);
        ++smoothed;
      }
    }
    EXPECT_GT(unchanged, 0);
    EXPECT_GT(divided, 0);
    EXPECT_GT(smoothed, 0);
  }
}

TEST(RopeTest, DefaultAndLinearFrequencies) {
  ModelConfig c;
  c.head_dim = 64;
  c.rope_theta = 10000.0f;
  std::vector<double> f = RopeInvFrequencies(c);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[i], std::pow(10000.0, -i / 32.0), 1e-15);
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 4.0f;
  std::vector<double> g = RopeInvFrequencies(c);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(g[i], f[i] / 4, 1e-15);
}

// The point of RoPE: <rope(q, m), rope(k, n)> depends only on m - n; and a rotation keeps norms.
TEST(RopeTest, DotProductDependsOnlyOnRelativePosition) {
  const ModelConfig c = Llama31Rope();
  const std::vector<double> inv = RopeInvFrequencies(c);
  std::mt19937 rng(::pkv::testing::TestSeed());
  std::normal_distribution<float> normal;
  const int d = c.head_dim;
  std::vector<float> q(d), k(d), cs(d / 2), sn(d / 2);
  for (int i = 0; i < d; ++i) {
    q[i] = normal(rng);
    k[i] = normal(rng);
  }
  auto rotated_dot = [&](int64_t m, int64_t n) {
    std::vector<float> a = q, b = k;
    RopeCosSin(inv, m, cs.data(), sn.data());
    ApplyRope(a.data(), 1, d, cs.data(), sn.data());
    RopeCosSin(inv, n, cs.data(), sn.data());
    ApplyRope(b.data(), 1, d, cs.data(), sn.data());
    double dot = 0, na = 0, nq = 0;
    for (int i = 0; i < d; ++i) {
      dot += double{a[i]} * b[i];
      na += double{a[i]} * a[i];
      nq += double{q[i]} * q[i];
    }
    EXPECT_NEAR(na, nq, 1e-4 * nq);
    return dot;
  };
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t m = rng() % 100000, n = rng() % 100000, shift = rng() % 20000;
    EXPECT_NEAR(rotated_dot(m, n), rotated_dot(m + shift, n + shift), 1e-3);
  }
  // Position 0 is the identity.
  std::vector<float> a = q;
  RopeCosSin(inv, 0, cs.data(), sn.data());
  ApplyRope(a.data(), 1, d, cs.data(), sn.data());
  EXPECT_EQ(a, q);
}

// Rotate-half pairs element i with i + D/2 (not adjacent pairs as in GPT-J style).
TEST(RopeTest, RotateHalfPairing) {
  const int d = 8;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> cs = {0, 0, 0, 0}, sn = {1, 1, 1, 1};  // a 90-degree turn
  ApplyRope(x.data(), 1, d, cs.data(), sn.data());
  EXPECT_EQ(x, (std::vector<float>{-5, -6, -7, -8, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace pkv
