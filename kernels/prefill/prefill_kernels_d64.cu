// Instantiations of the prefill-attention kernel for head_dim 64 (fp16, bf16).
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"

namespace pkv::prefill::internal {

const void* PrefillKernelD64(decode::DType dtype) {
  return dtype == decode::DType::kFloat16
             ? reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<__half, 64>)
             : reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<__nv_bfloat16, 64>);
}

}  // namespace pkv::prefill::internal
