// Instantiations of the prefill-attention kernel for head_dim 128 (fp16, bf16; whole and split
// tiles) and of the split tiles' merge kernel.
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"

namespace pkv::prefill::internal {
namespace {

template <typename T>
const void* Kernel(bool split) {
  return split ? reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<T, 128, T, true>)
               : reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<T, 128>);
}

}  // namespace

const void* PrefillKernelD128(decode::DType dtype, bool split) {
  return dtype == decode::DType::kFloat16 ? Kernel<__half>(split) : Kernel<__nv_bfloat16>(split);
}

const void* PrefillSplitMergeKernelD128(decode::DType dtype) {
  return dtype == decode::DType::kFloat16
             ? reinterpret_cast<const void*>(&dev::PrefillSplitMergeKernel<__half, 128>)
             : reinterpret_cast<const void*>(&dev::PrefillSplitMergeKernel<__nv_bfloat16, 128>);
}

}  // namespace pkv::prefill::internal
