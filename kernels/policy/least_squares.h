// Ridge least squares for the cost model's small systems (a handful of columns, tens to hundreds
// of rows): min_w sum_i (a_i . w - b_i)^2 + lambda * sum_{j >= 1} w_j^2, column 0 being the
// intercept, which is not penalised. Solved through the normal equations by a Cholesky
// factorisation. Degenerate inputs never produce NaN: when A^T A + lambda is singular (a constant
// or repeated column, fewer rows than columns) a diagonal jitter, growing tenfold from 1e-10 of
// the mean diagonal, is added until the factorisation succeeds, which yields the minimum-norm-like
// solution a tiny ridge gives. Thread-safety: pure function.
#pragma once

#include <vector>

#include "absl/status/statusor.h"

namespace pkv::policy {

// a: rows x cols, row-major. INVALID_ARGUMENT for a shape mismatch, no rows, no columns, a
// negative lambda or a non-finite entry. The result has `cols` finite entries.
absl::StatusOr<std::vector<double>> RidgeLeastSquares(const std::vector<double>& a,
                                                      const std::vector<double>& b, int cols,
                                                      double lambda);

}  // namespace pkv::policy
