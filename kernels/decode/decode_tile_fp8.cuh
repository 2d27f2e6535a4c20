// The FP8-page tile of the decode kernel (decode_attention.cuh): the same per-warp MMA scheme as
// the 16-bit AttendTile, with operands read from FP8 shared memory by plain loads and converted
// in registers (fp8_convert.cuh) instead of ldmatrix, which only moves 16-bit elements.
//
// A dot product does not care in which order its terms come, so both MMAs use a permuted index:
//  - S^T = K Q^T contracts over the head dim. Lane (r, c) loads 8 bytes of K rows r and r + 8 at
//    head-dim offset 32kk + 8c; bytes 0-3 feed k-step 2kk and bytes 4-7 step 2kk + 1 (A operand
//    pairs (0,1) -> k 2c, 2c+1 and (2,3) -> k 2c+8, 2c+9). The Q B operand is loaded with the same
//    permutation (LoadQFragmentsFp8): 16 bytes of Q row r at 32kk + 8c.
//  - O^T += V^T P^T contracts over tokens, fixed by P's layout (tokens 2c, 2c+1, 2c+8, 2c+9), but
//    its M index (the head dim) is free: lane r loads the 4-byte word 8m + r of each of its four
//    tokens; byte b of the word is d slot r (b even) or r + 8 (b odd) of m-tile 2m + b/2. The
//    output head-dim index of slot (mt, r) is therefore Fp8Dim(mt, r) and of (mt, r + 8) one more.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/decode/device_util.cuh"
#include "kernels/decode/fp8_convert.cuh"
#include "kernels/decode/warp_state.cuh"

namespace pkv::decode::dev {

// Head-dim index of O^T slot (mt, r) on the FP8 path; slot (mt, r + 8) is Fp8Dim(mt, r) + 1.
__device__ __forceinline__ int Fp8Dim(int mt, int r) {
  return 32 * (mt >> 1) + 4 * r + 2 * (mt & 1);
}

// Q's B-operand fragments in the K path's permuted head-dim order, from the Q rows (type T) in
// shared memory at `qs` (row stride q_row_elems 16-bit elements), as fp16: the FP8 tile multiplies
// in fp16 whatever the query type, because an FP8 code becomes an fp16 in one instruction
// (fp8_convert.cuh) but a bf16 in four, which made bf16 FP8 decode compute bound
// (bench/results/2026-12-02-h200-fp8tune). bf16 queries are scaled by kFp8BfQueryScale into fp16
// (exact for |q| in [2^-6, 2^24); the caller multiplies the softmax scale back).
inline constexpr float kFp8BfQueryScale = 1.0f / 256.0f;

template <typename T>
__device__ __forceinline__ uint32_t QPairAsHalf2(uint32_t x) {
  if constexpr (std::is_same_v<T, __half>) {
    return x;
  } else {
    float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x));
    const __half2 h = __floats2half2_rn(f.x * kFp8BfQueryScale, f.y * kFp8BfQueryScale);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <int kD, typename T>
__device__ __forceinline__ void LoadQFragmentsFp8(uint32_t (&qf)[kD / 16][2], uint32_t qs,
                                                  int q_row_elems) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kk = 0; kk < kD / 32; ++kk) {
    const uint4 v = LdShared128(qs + ((lane >> 2) * q_row_elems + 32 * kk + 8 * (lane & 3)) * 2);
    qf[2 * kk][0] = QPairAsHalf2<T>(v.x);
    qf[2 * kk][1] = QPairAsHalf2<T>(v.y);
    qf[2 * kk + 1][0] = QPairAsHalf2<T>(v.z);
    qf[2 * kk + 1][1] = QPairAsHalf2<T>(v.w);
  }
}

// Scores and P.V for the warp's 16 tokens of one FP8 tile held in ring slot (kb, vb); rows are
// kD bytes, swizzled by Fp8SwizzleK / Fp8SwizzleV. Every operand is fp16 (qf from
// LoadQFragmentsFp8, P packed as fp16).
template <int kD, typename Kv>
__device__ __forceinline__ void AttendTileFp8(WarpState<kD>& st, const uint32_t (&qf)[kD / 16][2],
                                              uint32_t kb, uint32_t vb, int first_token, int len,
                                              float scale_log2) {
  constexpr int kChunks = kD / 16;
  const int lane = threadIdx.x & 31, wr = (threadIdx.x >> 5) * 16;
  const int r = lane >> 2, c = lane & 3;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int k0 = wr + r, k1 = k0 + 8;
#pragma unroll
  for (int kk = 0; kk < kD / 32; ++kk) {
    const int chunk = 2 * kk + (c >> 1), in_chunk = (c & 1) * 8;
    const uint2 w0 = LdShared64(kb + k0 * kD + (Fp8SwizzleK<kChunks>(chunk, k0) << 4) + in_chunk);
    const uint2 w1 = LdShared64(kb + k1 * kD + (Fp8SwizzleK<kChunks>(chunk, k1) << 4) + in_chunk);
    uint32_t a[4] = {Fp8x2ToHalf2<Kv>(w0.x), Fp8x2ToHalf2<Kv>(w1.x), Fp8x2ToHalf2<Kv>(w0.x >> 16),
                     Fp8x2ToHalf2<Kv>(w1.x >> 16)};
    Mma16816<__half>(acc, a, qf[2 * kk][0], qf[2 * kk][1]);
    const uint32_t b[4] = {Fp8x2ToHalf2<Kv>(w0.y), Fp8x2ToHalf2<Kv>(w1.y),
                           Fp8x2ToHalf2<Kv>(w0.y >> 16), Fp8x2ToHalf2<Kv>(w1.y >> 16)};
    Mma16816<__half>(acc, b, qf[2 * kk + 1][0], qf[2 * kk + 1][1]);
  }
  uint32_t pb0, pb1;
  OnlineSoftmaxStep<kD, __half>(st, acc, first_token, len, scale_log2, &pb0, &pb1);
  const int t0 = wr + 2 * c;  // this lane's tokens: t0, t0 + 1, t0 + 8, t0 + 9
#pragma unroll
  for (int m = 0; m < kD / 32; ++m) {
    const int chunk = 2 * m + (r >> 2), in_chunk = (r & 3) * 4;
    auto word = [&](int t) {
      return LdShared32(vb + t * kD + (Fp8SwizzleV<kChunks>(chunk, t) << 4) + in_chunk);
    };
    const uint32_t w0 = word(t0), w1 = word(t0 + 1), w2 = word(t0 + 8), w3 = word(t0 + 9);
    // [w0.b, w1.b] pairs: bytes 0/1 -> m-tile 2m, bytes 2/3 -> m-tile 2m + 1.
    const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
    const uint32_t lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
    const uint32_t a0[4] = {Fp8x2ToHalf2<Kv>(lo01), Fp8x2ToHalf2<Kv>(lo01 >> 16),
                            Fp8x2ToHalf2<Kv>(lo23), Fp8x2ToHalf2<Kv>(lo23 >> 16)};
    Mma16816<__half>(st.o[2 * m], a0, pb0, pb1);
    const uint32_t a1[4] = {Fp8x2ToHalf2<Kv>(hi01), Fp8x2ToHalf2<Kv>(hi01 >> 16),
                            Fp8x2ToHalf2<Kv>(hi23), Fp8x2ToHalf2<Kv>(hi23 >> 16)};
    Mma16816<__half>(st.o[2 * m + 1], a1, pb0, pb1);
  }
}

}  // namespace pkv::decode::dev
