// A 4-bit linear layer as AWQ and GPTQ checkpoints store it: int32 words of eight 4-bit values
// and a scale per (group, output column). The two formats differ in which axis the words pack and
// in the nibble order (awq.h, gptq.h); both convert to and from the canonical Int4GroupMatrix.
// Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <vector>

namespace pkv {

struct PackedInt4Tensors {
  std::vector<int32_t> qweight;  // AWQ [k][n / 8], GPTQ [k / 8][n]
  std::vector<int32_t> qzeros;   // [k / group][n / 8] (both formats)
  std::vector<float> scales;     // [k / group][n], the checkpoint's fp16 values as float
};

}  // namespace pkv
