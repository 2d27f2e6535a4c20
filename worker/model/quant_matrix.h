// The canonical in-memory form of a quantized linear layer's weight, shared by every backend.
// AWQ and GPTQ checkpoints (awq.h, gptq.h) both unpack into Int4GroupMatrix, FP8 checkpoints
// (fp8_weights.h) into Fp8Matrix; the CPU backend dequantizes them to float32 (the oracle), the
// CUDA backend repacks them on the host into its kernels' layout. Both are row-major like
// nn.Linear: [out = n][in = k].
//
// This struct layout is a contract with the CUDA kernel side (kernels/model): add functions, never
// change the fields.
// Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/fp8.h"  // E4M3ToFloat / FloatToE4M3: the float8_e4m3fn coding

namespace pkv {

struct Int4GroupMatrix {  // w[r][j] = (q[r][j] - zero[r][j / group]) * scale[r][j / group]
  int64_t n = 0, k = 0;   // out, in; k % group == 0, group % 8 == 0 (128 in practice)
  int32_t group = 128;
  std::vector<uint32_t> q;    // [n][k / 8]: k-index j of row r is nibble (j % 8) (bits 4*(j%8)
                              //  .. 4*(j%8)+3) of word r * (k / 8) + j / 8; values 0..15
  std::vector<float> scale;   // [n][k / group] (exactly the checkpoint's fp16/bf16 value)
  std::vector<uint8_t> zero;  // [n][k / group], 0..15 (symmetric formats: 8)
};

struct Fp8Matrix {  // w[r][j] = e4m3_to_float(q[r][j]) * scale[r or 0]
  int64_t n = 0, k = 0;
  std::vector<uint8_t> q;    // [n][k] float8_e4m3fn bits (OCP FP8 E4M3, no inf, NaN = 0x7f/0xff)
  std::vector<float> scale;  // [n] per output channel, or [1] per tensor
};

// An all-zero n x k matrix with the right vector sizes. REQUIRES: n, k > 0, group > 0,
// group % 8 == 0, k % group == 0.
Int4GroupMatrix MakeInt4GroupMatrix(int64_t n, int64_t k, int32_t group);

// The 4-bit value of (row r, column j), and setting it (the nibble must hold 0 before).
inline uint8_t Int4At(const Int4GroupMatrix& m, int64_t r, int64_t j) {
  return static_cast<uint8_t>((m.q[r * (m.k / 8) + j / 8] >> (4 * (j % 8))) & 0xfu);
}
inline void OrInt4(Int4GroupMatrix* m, int64_t r, int64_t j, uint32_t v) {
  m->q[r * (m->k / 8) + j / 8] |= (v & 0xfu) << (4 * (j % 8));
}

// INTERNAL naming the mismatch when the fields break the invariants above (vector sizes, group
// divisibility, zero points above 15, a per-tensor/per-channel scale count other than 1 or n).
absl::Status CheckInt4GroupMatrix(const Int4GroupMatrix& m);
absl::Status CheckFp8Matrix(const Fp8Matrix& m);

// The float32 weights [n][k]. REQUIRES: the matrix passes its Check*() and out has n * k slots.
// Each element is one float multiply of exactly representable operands, so every backend's
// dequantization agrees with this one bit for bit.
void DequantizeInt4(const Int4GroupMatrix& m, float* out);
void DequantizeFp8(const Fp8Matrix& m, float* out);

// Tensor-parallel slices. Rows [begin, end) of the output features; columns [begin, end) of the
// input features, which for 4-bit matrices must start and end on group boundaries
// (INVALID_ARGUMENT otherwise: a group's scale cannot be split between ranks).
// REQUIRES: 0 <= begin < end <= n (rows) or k (columns).
Int4GroupMatrix SliceInt4Rows(const Int4GroupMatrix& m, int64_t begin, int64_t end);
absl::StatusOr<Int4GroupMatrix> SliceInt4Columns(const Int4GroupMatrix& m, int64_t begin,
                                                 int64_t end);
Fp8Matrix SliceFp8Rows(const Fp8Matrix& m, int64_t begin, int64_t end);
Fp8Matrix SliceFp8Columns(const Fp8Matrix& m, int64_t begin, int64_t end);

}  // namespace pkv
