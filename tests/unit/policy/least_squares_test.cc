// Ridge least squares (kernels/policy/least_squares.h): recovers known coefficients from
// synthetic data, shrinks toward zero with lambda (never the intercept), and stays finite on
// degenerate systems; malformed input is INVALID_ARGUMENT.
#include "kernels/policy/least_squares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace pkv::policy {
namespace {

struct Problem {
  std::vector<double> a, b, w;
  int cols = 0;
};

// rows x cols design with an intercept column and normal features; b = a.w + noise.
Problem Synthetic(std::mt19937& rng, int rows, int cols, double noise) {
  Problem p;
  p.cols = cols;
  std::normal_distribution<double> n(0.0, 1.0);
  for (int j = 0; j < cols; ++j) p.w.push_back(3.0 * n(rng));
  for (int i = 0; i < rows; ++i) {
    double y = 0;
    for (int j = 0; j < cols; ++j) {
      const double x = j == 0 ? 1.0 : n(rng);
      p.a.push_back(x);
      y += x * p.w[j];
    }
    p.b.push_back(y + noise * n(rng));
  }
  return p;
}

TEST(LeastSquaresTest, RecoversKnownCoefficients) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int cols = std::uniform_int_distribution<int>(1, 7)(rng);
    const Problem p = Synthetic(rng, 40 + 10 * cols, cols, 1e-3);
    absl::StatusOr<std::vector<double>> w = RidgeLeastSquares(p.a, p.b, p.cols, 0.0);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->size(), p.w.size());
    for (int j = 0; j < cols; ++j) EXPECT_NEAR((*w)[j], p.w[j], 1e-2) << "trial " << trial;
  }
}

TEST(LeastSquaresTest, ExactDataIsFitExactly) {
  std::mt19937 rng(5);
  const Problem p = Synthetic(rng, 30, 4, 0.0);
  absl::StatusOr<std::vector<double>> w = RidgeLeastSquares(p.a, p.b, p.cols, 0.0);
  ASSERT_TRUE(w.ok());
  for (int j = 0; j < 4; ++j) EXPECT_NEAR((*w)[j], p.w[j], 1e-9);
}

TEST(LeastSquaresTest, RidgeShrinksSlopesButNotTheIntercept) {
  // b = 5 + 2 x on x in {-1, 1}: a huge lambda drives the slope to 0, the intercept stays at the
  // mean of b (5).
  const std::vector<double> a = {1, -1, 1, 1, 1, -1, 1, 1};
  const std::vector<double> b = {3, 7, 3, 7};
  absl::StatusOr<std::vector<double>> w0 = RidgeLeastSquares(a, b, 2, 0.0);
  absl::StatusOr<std::vector<double>> wl = RidgeLeastSquares(a, b, 2, 1e9);
  ASSERT_TRUE(w0.ok() && wl.ok());
  EXPECT_NEAR((*w0)[0], 5.0, 1e-9);
  EXPECT_NEAR((*w0)[1], 2.0, 1e-9);
  EXPECT_NEAR((*wl)[0], 5.0, 1e-6);
  EXPECT_NEAR((*wl)[1], 0.0, 1e-6);
}

void ExpectFinite(const absl::StatusOr<std::vector<double>>& w, size_t cols) {
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->size(), cols);
  for (double v : *w) EXPECT_TRUE(std::isfinite(v));
}

TEST(LeastSquaresTest, DegenerateSystemsStayFinite) {
  // A repeated column, a constant column next to the intercept, all-zero features, fewer rows
  // than columns, a single row.
  std::vector<double> repeated, constant, zeros;
  std::vector<double> b;
  for (int i = 0; i < 10; ++i) {
    repeated.insert(repeated.end(), {1.0, double(i), double(i)});
    constant.insert(constant.end(), {1.0, 1.0, double(i % 3)});
    zeros.insert(zeros.end(), {0.0, 0.0, 0.0});
    b.push_back(0.5 * i);
  }
  ExpectFinite(RidgeLeastSquares(repeated, b, 3, 0.0), 3);
  ExpectFinite(RidgeLeastSquares(constant, b, 3, 0.0), 3);
  ExpectFinite(RidgeLeastSquares(zeros, b, 3, 0.0), 3);
  ExpectFinite(RidgeLeastSquares({1, 2, 3, 4, 5, 6}, {1.0}, 6, 0.0), 6);
  ExpectFinite(RidgeLeastSquares({1, 2, 3, 4, 5, 6, 7, 8}, {1.0, 2.0}, 4, 0.0), 4);
  // The repeated column's fit still reproduces the data (any split of the slope works).
  absl::StatusOr<std::vector<double>> w = RidgeLeastSquares(repeated, b, 3, 0.0);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR((*w)[0] + i * ((*w)[1] + (*w)[2]), b[i], 1e-4);
}

TEST(LeastSquaresTest, MalformedInputIsInvalidArgument) {
  const auto code = [](const absl::StatusOr<std::vector<double>>& s) { return s.status().code(); };
  EXPECT_EQ(code(RidgeLeastSquares({1, 2, 3}, {1, 2}, 2, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RidgeLeastSquares({}, {}, 2, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RidgeLeastSquares({1, 2}, {1}, 0, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RidgeLeastSquares({1, 2}, {1}, 2, -1)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RidgeLeastSquares({1, NAN}, {1}, 2, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(RidgeLeastSquares({1, 2}, {INFINITY}, 2, 0)), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv::policy
