// GPTQ packing (AutoGPTQ / GPTQModel QuantLinear, vLLM's gptq loader) of a 4-bit linear layer with
// n outputs, k inputs and groups of `group` input rows:
//   qweight I32 [k / 8][n]          word (b, r) holds q[r][8b + i] in nibble i (bits 4i..4i+3)
//   qzeros  I32 [k / group][n / 8]  word (g, c) holds the zero point of output 8c + i in nibble i
//   scales  F16 [k / group][n]
//   g_idx   I32 [k]                 group of each input row; without act-order j / group
// with w[r][j] = (q[r][j] - zero[r][j / group]) * scale[r][j / group]. checkpoint_format "gptq"
// (v1) stores zero - 1 in each nibble (a historical off-by-one of AutoGPTQ; symmetric checkpoints
// therefore hold 7 = 0x77777777 words), so a zero point of 0 is stored as 0xf and read back as
// (0xf + 1) & 0xf; "gptq_v2" stores the zero point itself.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "worker/model/packed_int4.h"
#include "worker/model/quant_matrix.h"

namespace pkv {

// REQUIRES: n % 8 == 0, k % group == 0, group % 8 == 0, vector sizes as above.
Int4GroupMatrix UnpackGptq(const PackedInt4Tensors& packed, int64_t n, int64_t k, int32_t group,
                           bool v2);
// REQUIRES: CheckInt4GroupMatrix(m) is OK and m.n % 8 == 0.
PackedInt4Tensors PackGptq(const Int4GroupMatrix& m, bool v2);

}  // namespace pkv
