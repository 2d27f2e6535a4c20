// Instantiations of the FP8-page decode attention kernel for head_dim 256 (E4M3 and E5M2 codes,
// fp16 and bf16 queries).
#include "kernels/decode/decode_attention.cuh"
#include "kernels/decode/kernel_table.h"

namespace pkv::decode::internal {

const void* Fp8AttentionD256(DType dtype, Fp8Format format) {
  const bool bf16 = dtype == DType::kBFloat16;
  if (format == Fp8Format::kE5M2) {
    return bf16 ? reinterpret_cast<const void*>(
                      &dev::DecodeAttentionKernel<256, __nv_bfloat16, dev::KvE5M2>)
                : reinterpret_cast<const void*>(
                      &dev::DecodeAttentionKernel<256, __half, dev::KvE5M2>);
  }
  return bf16
             ? reinterpret_cast<const void*>(
                   &dev::DecodeAttentionKernel<256, __nv_bfloat16, dev::KvE4M3>)
             : reinterpret_cast<const void*>(&dev::DecodeAttentionKernel<256, __half, dev::KvE4M3>);
}

}  // namespace pkv::decode::internal
