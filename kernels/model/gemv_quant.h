// Quantized weights for the fused GEMV (gemv.h): the host repack from the canonical in-memory
// formats (worker/model/quant_matrix.h: row-major [n][k] nn.Linear order) into the layouts the
// kernel reads, and the host dequantization the device results are checked against. Plain C++.
//
// Canonical 4-bit (Int4GroupMatrix): w[r][j] = (q[r][j] - zero[r][j / group]) * scale[..];
// q is [n][k / 8] words, k-index j in nibble j % 8 of word r * (k / 8) + j / 8.
// Canonical fp8 (Fp8Matrix): w[r][j] = e4m3(q[r][j]) * scale[r] (or scale[0] per tensor).
//
// Packed 4-bit layout (GemvWeightFormat::kInt4), chosen so one 16-byte load per lane covers a
// unit of 4 K steps (128 k) and the nibbles of each MMA register pair sit 16 bits apart:
//   q      [n][k / 8] words; row r, unit b = j / 128, lane c, step u: word r * (k / 8) + 16 b +
//          4 c + u holds k = 128 b + 32 u + 8 c + i (i = 0..7) in nibble i / 2 + 4 (i % 2), so
//          (word >> 4 p) & 0x000f000f holds the pair (2p, 2p + 1) a register of the MMA takes;
//          or-ing the magic exponent 0x6400 (fp16 1024) or 0x4300 (bf16 128) makes it the pair
//          of 16-bit numbers magic + q, exactly.
//   scales [n][k / 128] words: low half the group's scale rounded to the activation dtype, high
//          half magic + zero in that dtype (exact). Groups larger than 128 repeat their word.
//   The kernel computes (magic + q - (magic + zero)) * scale in the dtype: the difference is
//   exact (|q - zero| <= 15), the product rounds once, so every dequantized weight equals
//   round_to_dtype((q - zero) * round_to_dtype(scale)) (DequantizeInt4ToDtype). When the
//   checkpoint's scales are already in the activation dtype that is round_to_dtype of the float
//   oracle; an fp16 scale used with bf16 activations adds one rounding of the scale (2^-9).
// Packed fp8 layout (kFp8): q [n][k] bytes; row r, unit b = j / 64, lane c, step u: byte
//   r * k + 64 b + 16 c + 8 u + i holds k = 64 b + 32 u + 8 c + i. Scales stay float; the GEMV
//   applies them to the fp32 sums (the weights themselves are exact in fp16 and bf16), the
//   dequantize kernel rounds e4m3 * scale to the dtype once (DequantizeFp8ToDtype).
//   e4m3 NaN codes (0x7f, 0xff) are rejected by the repack: the kernel has no NaN path.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"

namespace pkv::gpu {

struct GemvInt4Weights {
  std::vector<uint32_t> q;       // [n][k / 8], packed layout above
  std::vector<uint32_t> scales;  // [n][k / 128] (scale, magic + zero) words
};

struct GemvFp8Weights {
  std::vector<uint8_t> q;     // [n][k], packed layout above
  std::vector<float> scales;  // [n] per row, or [1] per tensor
};

// INVALID_ARGUMENT when n or k is not positive, k % 128 != 0, group is not a positive multiple
// of 128 dividing k, a zero point exceeds 15, or a scale is not finite.
absl::StatusOr<GemvInt4Weights> RepackInt4ForGemv(int64_t n, int64_t k, int32_t group,
                                                  const uint32_t* q, const float* scale,
                                                  const uint8_t* zero, decode::DType dtype);

// scale_count is n (per output row) or 1 (per tensor). INVALID_ARGUMENT when k % 64 != 0, a
// weight is an e4m3 NaN, a scale is not finite, or scale_count is neither.
absl::StatusOr<GemvFp8Weights> RepackFp8ForGemv(int64_t n, int64_t k, const uint8_t* q,
                                                const float* scale, int64_t scale_count);

// OCP FP8 E4M3 (no infinities; 0x7f / 0xff are NaN) to float, exactly.
float E4m3ToFloat(uint8_t bits);

// The canonical formats dequantized in float32: the oracle. [n][k] row-major.
std::vector<float> DequantizeInt4Host(int64_t n, int64_t k, int32_t group, const uint32_t* q,
                                      const float* scale, const uint8_t* zero);
std::vector<float> DequantizeFp8Host(int64_t n, int64_t k, const uint8_t* q, const float* scale,
                                     int64_t scale_count);

// What the device dequantize kernel writes, as 16-bit patterns of `dtype` (see above).
std::vector<uint16_t> DequantizeInt4ToDtype(int64_t n, int64_t k, int32_t group, const uint32_t* q,
                                            const float* scale, const uint8_t* zero,
                                            decode::DType dtype);
std::vector<uint16_t> DequantizeFp8ToDtype(int64_t n, int64_t k, const uint8_t* q,
                                           const float* scale, int64_t scale_count,
                                           decode::DType dtype);

}  // namespace pkv::gpu
