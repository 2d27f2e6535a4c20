// Host-side fp16 and bf16 storage types, bit-compatible with CUDA's __half and __nv_bfloat16 so the
// same buffers can be filled on the host and read by kernels. Conversions round to nearest even;
// NaN stays NaN. Header-only and usable from .cu files (host code only).
#pragma once

#include <cstdint>
#include <cstring>

namespace pkv {

struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

inline float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t BitsFromFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float ToFloat(float x) { return x; }

inline float ToFloat(BFloat16 x) { return FloatFromBits(static_cast<uint32_t>(x.bits) << 16); }

inline BFloat16 ToBFloat16(float f) {
  uint32_t u = BitsFromFloat(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

inline float ToFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return FloatFromBits(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return FloatFromBits(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 31) return FloatFromBits(sign | 0x7f800000u | mant << 13);
  return FloatFromBits(sign | (exp + 127 - 15) << 23 | mant << 13);
}

inline Half ToHalf(float f) {
  const uint32_t u = BitsFromFloat(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{static_cast<uint16_t>(sign | 0x7e00u)};   // NaN
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return Half{sign};
    const uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return Half{static_cast<uint16_t>(sign | half_mant)};
  }
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return Half{static_cast<uint16_t>(sign | h)};
}

// Generic conversion used by templated host code: FromFloat<T>(x).
template <typename T>
inline T FromFloat(float x);
template <>
inline float FromFloat<float>(float x) {
  return x;
}
template <>
inline Half FromFloat<Half>(float x) {
  return ToHalf(x);
}
template <>
inline BFloat16 FromFloat<BFloat16>(float x) {
  return ToBFloat16(x);
}

}  // namespace pkv
