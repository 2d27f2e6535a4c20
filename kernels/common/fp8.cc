#include "kernels/common/fp8.h"

#include <cmath>
#include <limits>

namespace pkv {
namespace {

// One coder for both formats: kMantBits mantissa bits, exponent bias kBias, largest finite code
// kMaxCode (sign excluded) of value kMax.
struct Fp8Traits {
  int mant_bits;
  int bias;
  uint8_t max_code;
  double max;
};
constexpr Fp8Traits kE4M3{3, 7, 0x7e, 448.0};
constexpr Fp8Traits kE5M2{2, 15, 0x7b, 57344.0};

float Decode(uint8_t bits, const Fp8Traits& t) {
  const int mant = bits & ((1 << t.mant_bits) - 1);
  const int e = (bits & 0x7f) >> t.mant_bits;
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  const int mant_steps = 1 << t.mant_bits;
  if (e == 0) return sign * std::ldexp(static_cast<float>(mant), 1 - t.bias - t.mant_bits);
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / mant_steps, e - t.bias);
}

uint8_t Encode(float x, const Fp8Traits& t) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= t.max) return sign | t.max_code;  // saturate (infinity included)
  if (a < std::ldexp(1.0, 1 - t.bias)) {
    // Subnormal steps of 2^(1 - bias - mant_bits); a rounded count of 2^mant_bits is the smallest
    // normal, whose code is exactly that count.
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, t.bias - 1 + t.mant_bits)));
  }
  int exp2 = 0;
  std::frexp(a, &exp2);  // a = f * 2^exp2, f in [0.5, 1): a in [2^(exp2-1), 2^exp2)
  int e = exp2 - 1;
  // Mantissa steps of 2^(e - mant_bits); scaling by a power of two is exact: one rounding, to
  // even (nearbyint under the default rounding mode).
  const int steps = 1 << t.mant_bits;
  int mant = static_cast<int>(std::nearbyint(std::ldexp(a, t.mant_bits - e))) - steps;
  if (mant == steps) {
    mant = 0;
    ++e;
  }
  const int code = ((e + t.bias) << t.mant_bits) | mant;
  // Rounding up past the largest finite value saturates (a < max, so only by the last half step).
  return sign | static_cast<uint8_t>(code > t.max_code ? t.max_code : code);
}

}  // namespace

float E4M3ToFloat(uint8_t bits) {
  if ((bits & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  return Decode(bits, kE4M3);
}
uint8_t FloatToE4M3(float x) { return Encode(x, kE4M3); }

float E5M2ToFloat(uint8_t bits) {
  const int low = bits & 0x7f;
  if (low > 0x7c) return std::numeric_limits<float>::quiet_NaN();
  if (low == 0x7c) return (bits & 0x80) ? -INFINITY : INFINITY;
  return Decode(bits, kE5M2);
}
uint8_t FloatToE5M2(float x) { return Encode(x, kE5M2); }

}  // namespace pkv
