// Scalar FP8 coding on the device for the KV write (rope_kv_kernels.cu) and the generic attention
// kernel: bit for bit kernels/common/fp8.cc (round to nearest even, saturate to the largest finite
// value, NaN -> 0x7f), so the CPU reference, the CPU backend and these kernels agree on every
// code. Software rather than sm_89's cvt.rn.satfinite.e4m3x2: one code path on every GPU (sm_86
// has no FP8 instructions), the PTX NaN convention need not be matched, and the write costs a few
// ALU ops per element of a kernel bound by its launch and its qkv reads. The tensor-core
// attention kernels decode pairs in registers with kernels/decode/fp8_convert.cuh instead.
#pragma once

#include <cstdint>

#include "kernels/attention/fp8_kv.h"
#include "kernels/decode/fp8_convert.cuh"

namespace pkv::gpu::dev {

using decode::dev::KvE4M3;
using decode::dev::KvE5M2;

// The format's coding constants (kernels/common/fp8.cc's Fp8Traits).
template <typename Kv>
struct Fp8Code;
template <>
struct Fp8Code<KvE4M3> {
  static constexpr int kMantBits = 3, kBias = 7, kMaxCode = 0x7e;
  static constexpr float kMax = 448.0f;
};
template <>
struct Fp8Code<KvE5M2> {
  static constexpr int kMantBits = 2, kBias = 15, kMaxCode = 0x7b;
  static constexpr float kMax = 57344.0f;
};

// FloatToE4M3 / FloatToE5M2. Every scaling below is by a power of two within float's range, so
// exact; the one rounding is rintf (to nearest even).
template <typename Kv>
__device__ __forceinline__ uint8_t EncodeFp8(float x) {
  using C = Fp8Code<Kv>;
  if (isnan(x)) return 0x7f;
  const uint32_t sign = signbit(x) ? 0x80u : 0u;
  const float a = fabsf(x);
  if (a >= C::kMax) return static_cast<uint8_t>(sign | C::kMaxCode);
  if (a < ldexpf(1.0f, 1 - C::kBias)) {  // subnormal steps; a count of 2^mant is the first normal
    return static_cast<uint8_t>(
        sign | static_cast<uint32_t>(rintf(ldexpf(a, C::kBias - 1 + C::kMantBits))));
  }
  int exp2 = 0;
  frexpf(a, &exp2);  // a in [2^(exp2 - 1), 2^exp2)
  int e = exp2 - 1;
  constexpr int kSteps = 1 << C::kMantBits;
  int mant = static_cast<int>(rintf(ldexpf(a, C::kMantBits - e))) - kSteps;
  if (mant == kSteps) {
    mant = 0;
    ++e;
  }
  const int code = ((e + C::kBias) << C::kMantBits) | mant;
  return static_cast<uint8_t>(sign |
                              static_cast<uint32_t>(code > C::kMaxCode ? C::kMaxCode : code));
}

// E4M3ToFloat / E5M2ToFloat (E4M3 0x7f: NaN; E5M2 0x7c: inf, above: NaN).
template <typename Kv>
__device__ __forceinline__ float DecodeFp8(uint8_t bits) {
  using C = Fp8Code<Kv>;
  const int low = bits & 0x7f;
  const float sign = (bits & 0x80) ? -1.0f : 1.0f;
  if constexpr (C::kBias == 7) {
    if (low == 0x7f) return __int_as_float(0x7fffffff);
  } else {
    if (low > 0x7c) return __int_as_float(0x7fffffff);
    if (low == 0x7c) return sign * __int_as_float(0x7f800000);
  }
  const int mant = low & ((1 << C::kMantBits) - 1), e = low >> C::kMantBits;
  if (e == 0) return sign * ldexpf(static_cast<float>(mant), 1 - C::kBias - C::kMantBits);
  return sign * ldexpf(1.0f + static_cast<float>(mant) / (1 << C::kMantBits), e - C::kBias);
}

// Runs f(tag) with tag the KV element: T itself for kAuto (16-bit pages), KvE4M3 / KvE5M2 for FP8.
template <typename T, typename F>
decltype(auto) DispatchKvElem(KvCacheDtype kv, F&& f) {
  switch (kv) {
    case KvCacheDtype::kFp8E4M3:
      return f(KvE4M3{});
    case KvCacheDtype::kFp8E5M2:
      return f(KvE5M2{});
    default:
      return f(T{});
  }
}

}  // namespace pkv::gpu::dev
