// The weight-load stage of the fused GEMV (gemv_kernel.cuh) as a policy per GemvWeightFormat:
// what a lane's 16-byte load of one unit holds and how it becomes the 16-bit MMA words of each
// step of the unit (the layouts: gemv_quant.h). Shared with the dequantize kernel
// (gemv_dequant.cu), so both produce the same bits.
//
// A policy W has
//   kFormat, kSteps            the format and GemvUnitSteps(kFormat)
//   kRowScale                  the fp32 sums are multiplied by a per-row float scale (fp8)
//   kScaleWords                one 32-bit scale word per row and unit rides with the load (int4)
//   kUnitScale                 the MMA operands are unscaled; the kernel multiplies each unit's
//                              fp32 MMA sums by UnitScale<T>(s) of the row (int4: a unit is one
//                              128-k group, so one scale per row and unit)
//   Expand<T>(v, s, u)         the dequantized words of step u (0..kSteps-1) from the unit's 16
//                              bytes v and its scale word s: w.{x,y,z,w} = k pairs (0,1), (2,3),
//                              (4,5), (6,7) of the lane's 8 k of that step (gemv_plan.h: GemvFragA)
//   Operand<T>(v, s, u)        what the GEMV's MMA takes for step u: Expand, or with kUnitScale
//                              the words before the scale multiply
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/model/gemv_plan.h"

namespace pkv::gpu::gemv {

struct DenseWeights {
  static constexpr GemvWeightFormat kFormat = GemvWeightFormat::kDense;
  static constexpr int kSteps = 1;
  static constexpr bool kRowScale = false;
  static constexpr bool kScaleWords = false;
  static constexpr bool kUnitScale = false;
  template <typename T>
  static __device__ __forceinline__ uint4 Expand(const uint4& v, uint32_t, int) {
    return v;
  }
  template <typename T>
  static __device__ __forceinline__ uint4 Operand(const uint4& v, uint32_t, int) {
    return v;
  }
};

// Packed 16-bit pair arithmetic on raw words.
template <typename T>
struct Pair;
template <>
struct Pair<__half> {
  using V = __half2;
};
template <>
struct Pair<__nv_bfloat16> {
  using V = __nv_bfloat162;
};
template <typename T>
__device__ __forceinline__ typename Pair<T>::V AsPair(uint32_t w) {
  return *reinterpret_cast<const typename Pair<T>::V*>(&w);
}
template <typename T>
__device__ __forceinline__ uint32_t AsWord(typename Pair<T>::V p) {
  return *reinterpret_cast<const uint32_t*>(&p);
}
template <typename T>
__device__ __forceinline__ uint32_t Sub2(uint32_t a, uint32_t b) {
  return AsWord<T>(__hsub2(AsPair<T>(a), AsPair<T>(b)));
}
template <typename T>
__device__ __forceinline__ uint32_t Mul2(uint32_t a, uint32_t b) {
  return AsWord<T>(__hmul2(AsPair<T>(a), AsPair<T>(b)));
}

template <typename T>
constexpr uint32_t kInt4Magic2 = 0x64006400u;  // fp16 1024: q in the low mantissa bits
template <>
constexpr uint32_t kInt4Magic2<__nv_bfloat16> = 0x43004300u;  // bf16 128

__device__ __forceinline__ uint32_t Lop3AndOr(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t r;  // (a & mask) | bits in one instruction
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(bits));
  return r;
}

// The 4 words of q - z (exact small integers in T) of one 4-bit word x (8 nibbles, pair p at
// nibbles p and p + 4) and z2 = magic + z in both halves.
template <typename T>
__device__ __forceinline__ uint4 Int4Centered(uint32_t x, uint32_t z2);
template <>
__device__ __forceinline__ uint4 Int4Centered<__half>(uint32_t x, uint32_t z2) {
  // Odd pairs without a shift (Marlin's trick): masked in place, nibble q lands as 16 q above
  // the magic 1024 (exact: < 2048), and (1024 + 16 q) / 16 - (64 + z) = q - z in one exact fma.
  constexpr uint32_t kMagic = kInt4Magic2<__half>;
  const __half2 odd_bias = __hsub2(__half2(__ushort_as_half(0x6380), __ushort_as_half(0x6380)),
                                   AsPair<__half>(z2));  // 960 - (1024 + z) = -(64 + z)
  const __half2 sixteenth(__ushort_as_half(0x2c00), __ushort_as_half(0x2c00));
  const uint32_t x8 = x >> 8;
  uint4 w;
  w.x = Sub2<__half>(Lop3AndOr(x, 0x000f000fu, kMagic), z2);
  w.y = AsWord<__half>(
      __hfma2(AsPair<__half>(Lop3AndOr(x, 0x00f000f0u, kMagic)), sixteenth, odd_bias));
  w.z = Sub2<__half>(Lop3AndOr(x8, 0x000f000fu, kMagic), z2);
  w.w = AsWord<__half>(
      __hfma2(AsPair<__half>(Lop3AndOr(x8, 0x00f000f0u, kMagic)), sixteenth, odd_bias));
  return w;
}
template <>
__device__ __forceinline__ uint4 Int4Centered<__nv_bfloat16>(uint32_t x, uint32_t z2) {
  // bf16 keeps 7 mantissa bits: above the magic 128 only the low nibble fits, so every pair is
  // shifted down first.
  constexpr uint32_t kMagic = kInt4Magic2<__nv_bfloat16>;
  uint4 w;
  w.x = Sub2<__nv_bfloat16>(Lop3AndOr(x, 0x000f000fu, kMagic), z2);
  w.y = Sub2<__nv_bfloat16>(Lop3AndOr(x >> 4, 0x000f000fu, kMagic), z2);
  w.z = Sub2<__nv_bfloat16>(Lop3AndOr(x >> 8, 0x000f000fu, kMagic), z2);
  w.w = Sub2<__nv_bfloat16>(Lop3AndOr(x >> 12, 0x000f000fu, kMagic), z2);
  return w;
}

struct Int4Weights {
  static constexpr GemvWeightFormat kFormat = GemvWeightFormat::kInt4;
  static constexpr int kSteps = 4;
  static constexpr bool kRowScale = false;
  static constexpr bool kScaleWords = true;
  static constexpr bool kUnitScale = true;
  // Word u of the load is step u's 8 nibbles; s = (scale, magic + zero) of the unit's group.
  // q - z is exact in T, so the MMA sums exact products (q - z) x in fp32, and one fp32 multiply
  // by the scale per row and unit replaces a rounded 16-bit multiply per weight pair.
  template <typename T>
  static __device__ __forceinline__ uint4 Operand(const uint4& v, uint32_t s, int u) {
    const uint32_t x = u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w;
    return Int4Centered<T>(x, __byte_perm(s, 0, 0x3232));
  }
  template <typename T>
  static __device__ __forceinline__ float UnitScale(uint32_t s) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __uint_as_float(s << 16);
    } else {
      return __half2float(__ushort_as_half(static_cast<unsigned short>(s & 0xffffu)));
    }
  }
  // (q - z) * scale rounded once to T (the dequantize kernel; the GEMV's reference weights).
  template <typename T>
  static __device__ __forceinline__ uint4 Expand(const uint4& v, uint32_t s, int u) {
    const uint4 c = Operand<T>(v, s, u);
    const uint32_t s2 = __byte_perm(s, 0, 0x1010);
    return make_uint4(Mul2<T>(c.x, s2), Mul2<T>(c.y, s2), Mul2<T>(c.z, s2), Mul2<T>(c.w, s2));
  }
};

// Two e4m3 codes (bytes lo and hi of `x` picked by the selector) as an exact 16-bit pair.
template <typename T>
__device__ __forceinline__ uint32_t E4m3Pair(uint32_t x, int pair);
template <>
__device__ __forceinline__ uint32_t E4m3Pair<__half>(uint32_t x, int pair) {
  // sm_89+: one cvt.rn.f16x2.e4m3x2; below, cuda_fp8.h's software path (exact either way).
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
      static_cast<__nv_fp8x2_storage_t>(pair == 0 ? x & 0xffffu : x >> 16), __NV_E4M3);
  return uint32_t{h.x} | uint32_t{h.y} << 16;
}
template <>
__device__ __forceinline__ uint32_t E4m3Pair<__nv_bfloat16>(uint32_t x, int pair) {
  // Each code to the top byte of its half: sign in place, exponent and mantissa shifted into
  // bf16's fields give the value * 2^-120 (subnormals included), which one exact multiply by
  // 2^120 restores.
  const uint32_t t = __byte_perm(x, 0, pair == 0 ? 0x1404 : 0x3424);
  const uint32_t b = ((t >> 4) & 0x07f007f0u) | (t & 0x80008000u);
  const __nv_bfloat162 r =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&b),
              __nv_bfloat162(__ushort_as_bfloat16(0x7b80), __ushort_as_bfloat16(0x7b80)));
  return *reinterpret_cast<const uint32_t*>(&r);
}

struct Fp8Weights {
  static constexpr GemvWeightFormat kFormat = GemvWeightFormat::kFp8;
  static constexpr int kSteps = 2;
  static constexpr bool kRowScale = true;
  static constexpr bool kScaleWords = false;
  static constexpr bool kUnitScale = false;
  // Words 2u and 2u + 1 of the load are step u's 8 codes in k order.
  template <typename T>
  static __device__ __forceinline__ uint4 Expand(const uint4& v, uint32_t, int u) {
    const uint32_t lo = u == 0 ? v.x : v.z, hi = u == 0 ? v.y : v.w;
    return make_uint4(E4m3Pair<T>(lo, 0), E4m3Pair<T>(lo, 1), E4m3Pair<T>(hi, 0),
                      E4m3Pair<T>(hi, 1));
  }
  template <typename T>
  static __device__ __forceinline__ uint4 Operand(const uint4& v, uint32_t s, int u) {
    return Expand<T>(v, s, u);
  }
};

}  // namespace pkv::gpu::gemv
