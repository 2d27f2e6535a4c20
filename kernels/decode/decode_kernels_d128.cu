// Instantiations of the decode kernels for head_dim 128 (fp16 and bf16).
#include "kernels/decode/decode_attention.cuh"
#include "kernels/decode/kernel_table.h"

namespace pkv::decode::internal {

KernelPair KernelsD128(DType dtype) {
  if (dtype == DType::kBFloat16) {
    return {reinterpret_cast<const void*>(&dev::DecodeAttentionKernel<128, __nv_bfloat16>),
            reinterpret_cast<const void*>(&dev::DecodeMergeKernel<128, __nv_bfloat16>)};
  }
  return {reinterpret_cast<const void*>(&dev::DecodeAttentionKernel<128, __half>),
          reinterpret_cast<const void*>(&dev::DecodeMergeKernel<128, __half>)};
}

}  // namespace pkv::decode::internal
