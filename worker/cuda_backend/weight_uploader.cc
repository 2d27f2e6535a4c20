#include "worker/cuda_backend/weight_uploader.h"

#include <cstring>

#include "kernels/common/float16.h"

namespace pkv::cuda_backend {

void ConvertChunk(const uint8_t* src, DType from, int64_t n, bool to_f32, decode::DType to,
                  uint8_t* dst) {
  const bool to_bf16 = !to_f32 && to == decode::DType::kBFloat16;
  const DType target = to_f32 ? DType::kF32 : (to_bf16 ? DType::kBF16 : DType::kF16);
  if (from == target) {
    std::memcpy(dst, src, n * DTypeSize(from));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (from == DType::kF32) {
      std::memcpy(&v, src + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      v = from == DType::kBF16 ? ToFloat(BFloat16{bits}) : ToFloat(Half{bits});
    }
    if (to_f32) {
      std::memcpy(dst + 4 * i, &v, 4);
    } else {
      const uint16_t out = to_bf16 ? ToBFloat16(v).bits : ToHalf(v).bits;
      std::memcpy(dst + 2 * i, &out, 2);
    }
  }
}

// Streams host tensors into the arena through two pinned buffers: while one chunk is copied to
// the GPU, the next is converted into the other buffer.

}  // namespace pkv::cuda_backend
