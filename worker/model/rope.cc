#include "worker/model/rope.h"

#include <cmath>
#include <numbers>

namespace pkv {

std::vector<double> RopeInvFrequencies(const ModelConfig& config) {
  const int32_t half = config.head_dim / 2;
  const RopeScaling& rs = config.rope_scaling;
  std::vector<double> f(half);
  for (int32_t i = 0; i < half; ++i) {
    f[i] = std::pow(static_cast<double>(config.rope_theta),
                    -2.0 * i / static_cast<double>(config.head_dim));
    if (rs.type == "linear") {
      f[i] /= rs.factor;
    } else if (rs.type == "llama3") {
      const double old = rs.original_max_position_embeddings;
      const double wavelen = 2.0 * std::numbers::pi / f[i];
      if (wavelen > old / rs.low_freq_factor) {
        f[i] /= rs.factor;
      } else if (wavelen >= old / rs.high_freq_factor) {
        const double s =
            (old / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f[i] *= (1.0 - s) / rs.factor + s;
      }
    }
  }
  return f;
}

void RopeCosSin(const std::vector<double>& inv_freq, int64_t pos, float* cos_out, float* sin_out) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void ApplyRope(float* x, int32_t num_heads, int32_t head_dim, const float* cos_t,
               const float* sin_t) {
  const int32_t half = head_dim / 2;
  for (int32_t h = 0; h < num_heads; ++h) {
    float* x1 = x + static_cast<int64_t>(h) * head_dim;
    float* x2 = x1 + half;
    for (int32_t i = 0; i < half; ++i) {
      const float a = x1[i], b = x2[i];
      x1[i] = a * cos_t[i] - b * sin_t[i];
      x2[i] = b * cos_t[i] + a * sin_t[i];
    }
  }
}

}  // namespace pkv
