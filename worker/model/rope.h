// Rotary position embedding in the Hugging Face Llama ("rotate half") convention: a head vector x
// of even length D is split into halves x1 = x[0, D/2), x2 = x[D/2, D); for frequency i,
//   out[i]       = x1[i] * cos(p * f_i) - x2[i] * sin(p * f_i)
//   out[i + D/2] = x2[i] * cos(p * f_i) + x1[i] * sin(p * f_i)
// with f_i = theta^(-2i / D), adjusted by the config's rope_scaling:
//   linear: f_i / factor.
//   llama3: wavelength w_i = 2*pi / f_i; with old = original_max_position_embeddings,
//           w_i > old / low_freq_factor (long waves):  f_i / factor;
//           w_i < old / high_freq_factor (short waves): f_i unchanged;
//           otherwise s = (old / w_i - low_freq_factor) / (high_freq_factor - low_freq_factor),
//           f_i * ((1 - s) / factor + s).
// Angles are computed in double precision from the position, so long contexts keep their accuracy.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/model/model_config.h"

namespace pkv {

// The D/2 inverse frequencies f_i of the config (head_dim, rope_theta, rope_scaling).
std::vector<double> RopeInvFrequencies(const ModelConfig& config);

// Fills cos/sin tables for one position: cos_out[i] = cos(pos * f_i), sin_out likewise.
//   inv_freq [D/2], cos_out [D/2], sin_out [D/2]
void RopeCosSin(const std::vector<double>& inv_freq, int64_t pos, float* cos_out, float* sin_out);

// Rotates `num_heads` consecutive head vectors in place with one position's tables.
//   x [num_heads][head_dim], cos/sin [head_dim / 2]
void ApplyRope(float* x, int32_t num_heads, int32_t head_dim, const float* cos_t,
               const float* sin_t);

}  // namespace pkv
