// Instantiations of the prefill-attention kernel for head_dim 64 (fp16, bf16; whole and split
// tiles) and of the split tiles' merge kernel.
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"

namespace pkv::prefill::internal {
namespace {

template <typename T>
const void* Kernel(bool split) {
  return split ? reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<T, 64, T, true>)
               : reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<T, 64>);
}

}  // namespace

const void* PrefillKernelD64(decode::DType dtype, bool split) {
  return dtype == decode::DType::kFloat16 ? Kernel<__half>(split) : Kernel<__nv_bfloat16>(split);
}

const void* PrefillSplitMergeKernelD64(decode::DType dtype) {
  return dtype == decode::DType::kFloat16
             ? reinterpret_cast<const void*>(&dev::PrefillSplitMergeKernel<__half, 64>)
             : reinterpret_cast<const void*>(&dev::PrefillSplitMergeKernel<__nv_bfloat16, 64>);
}

}  // namespace pkv::prefill::internal
