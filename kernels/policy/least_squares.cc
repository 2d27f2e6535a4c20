#include "kernels/policy/least_squares.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace pkv::policy {
namespace {

// In-place Cholesky of the n x n SPD matrix m (lower triangle); false if not positive definite.
bool Cholesky(std::vector<double>& m, int n) {
  for (int j = 0; j < n; ++j) {
    double d = m[j * n + j];
    for (int k = 0; k < j; ++k) d -= m[j * n + k] * m[j * n + k];
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double l = std::sqrt(d);
    m[j * n + j] = l;
    for (int i = j + 1; i < n; ++i) {
      double s = m[i * n + j];
      for (int k = 0; k < j; ++k) s -= m[i * n + k] * m[j * n + k];
      m[i * n + j] = s / l;
    }
  }
  return true;
}

// Solves L L^T x = v with the factor in m's lower triangle.
std::vector<double> CholeskySolve(const std::vector<double>& m, int n, std::vector<double> v) {
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < i; ++k) v[i] -= m[i * n + k] * v[k];
    v[i] /= m[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int k = i + 1; k < n; ++k) v[i] -= m[k * n + i] * v[k];
    v[i] /= m[i * n + i];
  }
  return v;
}

}  // namespace

absl::StatusOr<std::vector<double>> RidgeLeastSquares(const std::vector<double>& a,
                                                      const std::vector<double>& b, int cols,
                                                      double lambda) {
  const size_t rows = b.size();
  if (cols <= 0 || rows == 0 || a.size() != rows * static_cast<size_t>(cols)) {
    return absl::InvalidArgumentError(absl::StrCat("least squares: ", rows, " rows of ", cols,
                                                   " columns need ", rows * cols, " entries, got ",
                                                   a.size()));
  }
  if (!(lambda >= 0) || !std::isfinite(lambda)) {
    return absl::InvalidArgumentError("least squares: lambda must be finite and >= 0");
  }
  for (double v : a) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("least squares: non-finite entry");
  }
  for (double v : b) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("least squares: non-finite target");
  }
  const int n = cols;
  std::vector<double> ata(n * n, 0.0), atb(n, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const double* row = &a[r * n];
    for (int i = 0; i < n; ++i) {
      atb[i] += row[i] * b[r];
      for (int j = 0; j <= i; ++j) ata[i * n + j] += row[i] * row[j];
    }
  }
  double mean_diag = 0.0;
  for (int i = 0; i < n; ++i) {
    if (i > 0) ata[i * n + i] += lambda;
    mean_diag += ata[i * n + i] / n;
  }
  double jitter = 0.0;
  const double base = mean_diag > 0 ? mean_diag * 1e-10 : 1e-10;
  for (int attempt = 0; attempt < 24; ++attempt) {
    std::vector<double> m = ata;
    for (int i = 0; i < n; ++i) m[i * n + i] += jitter;
    if (Cholesky(m, n)) {
      std::vector<double> w = CholeskySolve(m, n, atb);
      bool finite = true;
      for (double v : w) finite = finite && std::isfinite(v);
      if (finite) return w;
    }
    jitter = jitter == 0.0 ? base : jitter * 10.0;
  }
  // Unreachable for finite inputs (the jitter ends up dominating the matrix); stay finite anyway.
  return std::vector<double>(n, 0.0);
}

}  // namespace pkv::policy
