// The dense float32 building blocks of the CPU forward pass. Single-threaded, row-major, no
// allocation. Linear() walks the weights in L2-sized blocks of rows and dots each block with every
// token of the batch while it is hot in cache, so a step over T tokens reads the layer's weights
// from memory once.
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>

namespace pkv {

// y[t][o] = dot(x[t][:], w[o][:]) (+ bias[o]) for t < num_tokens, o < out_features: nn.Linear.
//   x [num_tokens][in_features], w [out_features][in_features], bias [out_features] or nullptr,
//   y [num_tokens][out_features]. REQUIRES: y does not alias x.
void Linear(const float* x, int64_t num_tokens, int64_t in_features, const float* w,
            int64_t out_features, const float* bias, float* y);

// Adds Linear(x, w) into y (a residual connection): y[t][o] += dot(x[t], w[o]) (+ bias[o]).
void LinearAccumulate(const float* x, int64_t num_tokens, int64_t in_features, const float* w,
                      int64_t out_features, const float* bias, float* y);

// RMSNorm of each of `num_vectors` rows of length n: y = x / sqrt(mean(x^2) + eps) * weight.
//   x, y [num_vectors][n] (may alias), weight [n]
void RmsNorm(const float* x, int64_t num_vectors, int64_t n, const float* weight, float eps,
             float* y);

// SwiGLU activation in place: gate[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + exp(-z)).
//   gate, up [n]
void SiluMul(float* gate, const float* up, int64_t n);

// Dot product with several independent accumulators (the compiler vectorises it).
float Dot(const float* a, const float* b, int64_t n);

}  // namespace pkv
