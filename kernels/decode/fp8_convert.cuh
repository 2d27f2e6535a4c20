// Device-side FP8 KV helpers of the decode and prefill kernels: the KV element tags, pair
// conversions FP8x2 -> fp16x2 / bf16x2 in registers, and the shared loads the FP8 tile path uses.
//
// Conversions (the byte meanings are kernels/common/fp8.h's):
//  - E4M3 on sm_89+: one `cvt.rn.f16x2.e4m3x2` per pair (exact).
//  - E4M3 on sm_80/86 (no FP8 instructions): bit moves. Code (s, e, m) placed into fp16 bits
//    (s, 0e, m00...) is the value times 2^-8 exactly (subnormals included); the 2^8 is folded into
//    the K and V scales once per item (Fp8Unit) instead of a multiply per element. The one thing
//    lost is NaN (0x7f decodes to 480 * 2^-8): the KV writer never stores NaN from finite inputs.
//  - E5M2 everywhere: the code is the top byte of the fp16, so one byte permute is the conversion.
//  - bf16 queries: the fp16 pair widened to float and rounded to bf16, exact for every FP8 value.
// PKV_FP8_SOFTWARE_CVT (CMake option, measurement builds) takes the sm_80/86 path everywhere, so
// a Hopper card runs and times what an Ampere card runs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 890 || defined(PKV_FP8_SOFTWARE_CVT))
#define PKV_FP8_BIT_MOVES 1
#endif

namespace pkv::decode::dev {

struct KvE4M3 {};  // float8_e4m3fn KV codes
struct KvE5M2 {};  // float8_e5m2 KV codes

template <typename Kv>
inline constexpr bool kIsFp8Kv = std::is_same_v<Kv, KvE4M3> || std::is_same_v<Kv, KvE5M2>;
// Bytes of one cached element: the compute type's 2, or 1 for FP8.
template <typename Kv>
inline constexpr int kKvElemBytes = kIsFp8Kv<Kv> ? 1 : 2;

// The factor the converted values must be multiplied by (see the header comment).
template <typename Kv>
__device__ __forceinline__ float Fp8Unit() {
#if defined(PKV_FP8_BIT_MOVES)
  if constexpr (std::is_same_v<Kv, KvE4M3>) return 256.0f;
#endif
  return 1.0f;
}

// Codes in bits 0-7 and 8-15 of x -> two fp16 (element 0 in the low half), times 1 / Fp8Unit.
template <typename Kv>
__device__ __forceinline__ uint32_t Fp8x2ToHalf2(uint32_t x) {
  if constexpr (std::is_same_v<Kv, KvE5M2>) {
    return __byte_perm(x, 0u, 0x1404);  // [0, b0, 0, b1]
  } else {
#if defined(__CUDA_ARCH__) && !defined(PKV_FP8_BIT_MOVES)
    uint32_t y;
    const uint16_t lo = static_cast<uint16_t>(x);
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(y) : "h"(lo));
    return y;
#else
    return ((x & 0x7fu) << 7) | ((x & 0x80u) << 8) | ((x & 0x7f00u) << 15) | ((x & 0x8000u) << 16);
#endif
  }
}

// The same pair as the MMA operand type T (__half or __nv_bfloat16), packed like PackPair.
template <typename Kv, typename T>
__device__ __forceinline__ uint32_t Fp8x2To(uint32_t x) {
  const uint32_t h = Fp8x2ToHalf2<Kv>(x);
  if constexpr (std::is_same_v<T, __half>) {
    return h;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    __nv_bfloat162 b = __float22bfloat162_rn(f);
    return *reinterpret_cast<uint32_t*>(&b);
  }
}

__device__ __forceinline__ uint32_t LdShared32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint2 LdShared64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint4 LdShared128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

// Shared-memory swizzles of an FP8 ring tile: the 16-byte chunk `chunk` of token row `row` is
// stored at chunk position Swizzle(chunk, row) of the row (rows are kChunks * 16 bytes).
//  K is read with 8-byte loads, lane (r, c) taking row r's bytes 8c..8c+7 of a 32-byte column
//  pair of chunks: a half warp reads rows r..r+3, so XOR-ing by 2 * (row & 3) puts the four rows'
//  chunk pairs in four different bank groups pairs. V is read with 4-byte loads of the rows 2c
//  (and 2c+1), 32 bytes each: XOR by 2 * ((row >> 1) & 3). 64-byte rows (head dim 64) have 4
//  chunks: rows of one parity share banks, so K uses 2 * ((row >> 1) & 1) (conflict-free) and V
//  stays 2-way conflicted.
template <int kChunks>
__device__ __forceinline__ int Fp8SwizzleK(int chunk, int row) {
  return kChunks >= 8 ? chunk ^ (2 * (row & 3)) : chunk ^ (2 * ((row >> 1) & 1));
}
template <int kChunks>
__device__ __forceinline__ int Fp8SwizzleV(int chunk, int row) {
  return kChunks >= 8 ? chunk ^ (2 * ((row >> 1) & 3)) : chunk ^ (2 * ((row >> 1) & 1));
}

}  // namespace pkv::decode::dev
