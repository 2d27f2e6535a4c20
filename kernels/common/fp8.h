// The two OCP 8-bit float formats, as host code: the KV cache's FP8 storage (kernels/attention/
// kv_layout.h) and FP8 checkpoints' weights (worker/model/quant_matrix.h) both code through these,
// so the CPU oracle and every device path agree on what a byte means.
//
//   E4M3 (float8_e4m3fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity; the largest
//     finite value is +-448 (0x7e / 0xfe); NaN is 0x7f / 0xff; subnormals are m * 2^-9.
//   E5M2 (float8_e5m2): 1 sign, 5 exponent (bias 15), 2 mantissa bits: the top byte of an IEEE
//     fp16; +-inf is 0x7c / 0xfc, NaN 0x7d..0x7f (0xfd..0xff); the largest finite is +-57344.
//
// Decoding is exact. Encoding rounds to nearest, ties to even, and saturates to the largest finite
// value (infinities too: the CUDA `.satfinite` conversions do the same, so a stray large value
// never poisons a KV page with inf); NaN encodes as 0x7f. Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace pkv {

enum class Fp8Format : int32_t { kE4M3 = 0, kE5M2 = 1 };

inline const char* Fp8FormatName(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? "fp8_e4m3" : "fp8_e5m2";
}
// The largest finite value of the format (the saturation bound).
inline float Fp8MaxFinite(Fp8Format f) { return f == Fp8Format::kE4M3 ? 448.0f : 57344.0f; }

float E4M3ToFloat(uint8_t bits);
uint8_t FloatToE4M3(float x);
float E5M2ToFloat(uint8_t bits);
uint8_t FloatToE5M2(float x);

inline float Fp8ToFloat(uint8_t bits, Fp8Format f) {
  return f == Fp8Format::kE4M3 ? E4M3ToFloat(bits) : E5M2ToFloat(bits);
}
inline uint8_t FloatToFp8(float x, Fp8Format f) {
  return f == Fp8Format::kE4M3 ? FloatToE4M3(x) : FloatToE5M2(x);
}

}  // namespace pkv
