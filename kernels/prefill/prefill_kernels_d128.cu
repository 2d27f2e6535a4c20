// Instantiations of the prefill-attention kernel for head_dim 128 (fp16, bf16).
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"

namespace pkv::prefill::internal {

const void* PrefillKernelD128(decode::DType dtype) {
  return dtype == decode::DType::kFloat16
             ? reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<__half, 128>)
             : reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<__nv_bfloat16, 128>);
}

}  // namespace pkv::prefill::internal
