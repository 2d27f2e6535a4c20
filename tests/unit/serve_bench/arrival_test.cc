// Arrival processes: Poisson gaps have the exponential's mean and spread for a fixed seed,
// constant gaps are exact, and a seed fixes the sequence.
#include "bench/serve/arrival.h"

#include <cmath>

#include "gtest/gtest.h"

namespace pkv::serve_bench {
namespace {

TEST(ServeBenchArrivalTest, PoissonMeanAndVariance) {
  constexpr double kRate = 200;
  constexpr int kN = 200000;
  ArrivalProcess p(ArrivalKind::kPoisson, kRate, /*seed=*/42);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kN; ++i) {
    const double g = p.NextGapSeconds();
    ASSERT_GE(g, 0);
    sum += g;
    sum_sq += g * g;
  }
  const double mean = sum / kN;
  const double var = sum_sq / kN - mean * mean;
  // Standard error of the mean is (1/rate)/sqrt(N) = 0.22%: 1% is > 4 sigma.
  EXPECT_NEAR(mean * kRate, 1.0, 0.01);
  // Exponential: variance = mean^2 (a constant process would give 0).
  EXPECT_NEAR(var * kRate * kRate, 1.0, 0.03);
}

TEST(ServeBenchArrivalTest, PoissonCountsPerSecond) {
  // Arrivals in each 1 s window are Poisson(rate): mean and variance both equal the rate.
  constexpr double kRate = 50;
  ArrivalProcess p(ArrivalKind::kPoisson, kRate, 7);
  std::vector<int> counts(2000, 0);
  double t = p.NextGapSeconds();
  while (t < counts.size()) {
    ++counts[static_cast<size_t>(t)];
    t += p.NextGapSeconds();
  }
  double sum = 0, sum_sq = 0;
  for (int c : counts) {
    sum += c;
    sum_sq += static_cast<double>(c) * c;
  }
  const double mean = sum / counts.size();
  EXPECT_NEAR(mean, kRate, 0.02 * kRate);
  EXPECT_NEAR(sum_sq / counts.size() - mean * mean, kRate, 0.1 * kRate);
}

TEST(ServeBenchArrivalTest, ConstantIsExact) {
  ArrivalProcess p(ArrivalKind::kConstant, 8, 1);
  for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(p.NextGapSeconds(), 0.125);
}

TEST(ServeBenchArrivalTest, SeedFixesTheSequence) {
  ArrivalProcess a(ArrivalKind::kPoisson, 10, 3), b(ArrivalKind::kPoisson, 10, 3),
      c(ArrivalKind::kPoisson, 10, 4);
  bool differs = false;
  for (int i = 0; i < 20; ++i) {
    const double x = a.NextGapSeconds();
    EXPECT_EQ(x, b.NextGapSeconds());
    differs = differs || x != c.NextGapSeconds();
  }
  EXPECT_TRUE(differs);
}

TEST(ServeBenchArrivalTest, ParsesNames) {
  EXPECT_EQ(*ParseArrivalKind("poisson"), ArrivalKind::kPoisson);
  EXPECT_EQ(*ParseArrivalKind("constant"), ArrivalKind::kConstant);
  EXPECT_FALSE(ParseArrivalKind("bursty").ok());
}

}  // namespace
}  // namespace pkv::serve_bench
