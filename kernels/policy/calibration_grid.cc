#include "kernels/policy/calibration_grid.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace pkv::policy {
namespace {

int64_t KvBytes(const std::vector<int32_t>& lengths, const KvShape& shape) {
  int64_t tokens = 0;
  for (int32_t l : lengths) tokens += l;
  return tokens * shape.num_kv_heads * shape.head_dim * 2 /*K, V*/ * 2 /*bytes*/;
}

// gen.py's kinds (lengths in tokens, N_max 32768).
std::vector<int32_t> Lengths(std::mt19937& rng, const std::string& kind, int batch) {
  std::vector<int32_t> out;
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  if (kind == "uniform") {
    for (int i = 0; i < batch; ++i) out.push_back(uniform(128, 32768));
  } else if (kind == "bimodal") {
    const int n_long = std::max(1, batch / 4);
    for (int i = 0; i < batch; ++i) {
      out.push_back(i < n_long ? uniform(16384, 32768) : uniform(128, 1024));
    }
    std::shuffle(out.begin(), out.end(), rng);
  } else {  // zipf: 128 * k, k in 1..256, P(k) ~ k^-1.1
    std::vector<double> w(256);
    for (int k = 1; k <= 256; ++k) w[k - 1] = std::pow(k, -1.1);
    std::discrete_distribution<int> zipf(w.begin(), w.end());
    for (int i = 0; i < batch; ++i) out.push_back(128 * (zipf(rng) + 1));
  }
  return out;
}

}  // namespace

std::vector<GridCell> ReducedGrid(const KvShape& shape, int64_t max_kv_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<GridCell> grid;
  for (int b : {1, 4, 8}) {
    for (int n : {1024, 8192, 32768}) {
      grid.push_back({absl::StrCat("bucketed-B", b, "-N", n), std::vector<int32_t>(b, n), 0});
    }
  }
  for (const char* kind : {"uniform", "bimodal", "zipf"}) {
    for (int b : {2, 8, 32, 128}) {
      grid.push_back({absl::StrCat(kind, "-B", b), Lengths(rng, kind, b), 0});
    }
  }
  for (GridCell& c : grid) {
    c.kv_bytes = KvBytes(c.lengths, shape);
    if (c.kv_bytes > max_kv_bytes && c.kv_bytes > 0) {
      const double f = static_cast<double>(max_kv_bytes) / static_cast<double>(c.kv_bytes);
      for (int32_t& l : c.lengths) l = std::max(1, static_cast<int32_t>(std::floor(l * f)));
      c.kv_bytes = KvBytes(c.lengths, shape);
    }
  }
  std::stable_sort(grid.begin(), grid.end(),
                   [](const GridCell& a, const GridCell& b) { return a.kv_bytes < b.kv_bytes; });
  return grid;
}

}  // namespace pkv::policy
