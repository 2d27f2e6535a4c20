// AWQ "GEMM" packing (AutoAWQ WQLinear_GEMM, vLLM's awq loader) of a linear layer with n outputs,
// k inputs and groups of `group` input rows:
//   qweight I32 [k][n / 8]      word (j, c) holds q[8c + kAwqOrder[i]][j] in nibble i (bits 4i..)
//   qzeros  I32 [k / group][n / 8]  the same interleave of the zero points (stored as is, 0..15)
//   scales  F16 [k / group][n]
// with w[r][j] = (q[r][j] - zero[r][j / group]) * scale[r][j / group]. The interleave
// kAwqOrder = {0, 2, 4, 6, 1, 3, 5, 7} (AutoAWQ's AWQ_ORDER) puts even output columns in the low
// nibbles so the GEMM kernel's dequantization lines up with its fragment layout.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "worker/model/packed_int4.h"
#include "worker/model/quant_matrix.h"

namespace pkv {

inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// REQUIRES: n % 8 == 0, k % group == 0, group % 8 == 0, vector sizes as above.
Int4GroupMatrix UnpackAwq(const PackedInt4Tensors& packed, int64_t n, int64_t k, int32_t group);
// REQUIRES: CheckInt4GroupMatrix(m) is OK and m.n % 8 == 0.
PackedInt4Tensors PackAwq(const Int4GroupMatrix& m);

}  // namespace pkv
