#include "worker/model/cpu_ops.h"

#include <algorithm>
#include <cmath>

namespace pkv {

float Dot(const float* a, const float* b, int64_t n) {
  // Eight partial sums break the serial dependency chain so the loop vectorises without
  // -ffast-math; the order of summation is fixed, so results are deterministic.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

namespace {

// Weight rows per block: ~256 KiB, so a block stays in L2 while every token of the batch is dotted
// with it; weights then come from memory once per call and each token row (in_features floats,
// hot in L1) is re-read once per block.
constexpr int64_t kBlockBytes = 256 * 1024;

template <bool kAccumulate>
void LinearImpl(const float* x, int64_t num_tokens, int64_t in_features, const float* w,
                int64_t out_features, const float* bias, float* y) {
  const int64_t rows_per_block =
      std::max<int64_t>(1, kBlockBytes / (in_features * static_cast<int64_t>(sizeof(float))));
  for (int64_t o0 = 0; o0 < out_features; o0 += rows_per_block) {
    const int64_t o1 = std::min(out_features, o0 + rows_per_block);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* xt = x + t * in_features;
      float* yt = y + t * out_features;
      for (int64_t o = o0; o < o1; ++o) {
        const float v = Dot(xt, w + o * in_features, in_features) + (bias ? bias[o] : 0.0f);
        if constexpr (kAccumulate) {
          yt[o] += v;
        } else {
          yt[o] = v;
        }
      }
    }
  }
}

}  // namespace

void Linear(const float* x, int64_t num_tokens, int64_t in_features, const float* w,
            int64_t out_features, const float* bias, float* y) {
  LinearImpl<false>(x, num_tokens, in_features, w, out_features, bias, y);
}

void LinearAccumulate(const float* x, int64_t num_tokens, int64_t in_features, const float* w,
                      int64_t out_features, const float* bias, float* y) {
  LinearImpl<true>(x, num_tokens, in_features, w, out_features, bias, y);
}

void RmsNorm(const float* x, int64_t num_vectors, int64_t n, const float* weight, float eps,
             float* y) {
  for (int64_t v = 0; v < num_vectors; ++v) {
    const float* xv = x + v * n;
    float* yv = y + v * n;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(xv[i]) * xv[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / n + eps));
    for (int64_t i = 0; i < n; ++i) yv[i] = xv[i] * inv * weight[i];
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace pkv
