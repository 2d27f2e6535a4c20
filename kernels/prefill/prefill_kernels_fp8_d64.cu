// Instantiations of the prefill-attention kernel over FP8 pages for head_dim 64 (fp16 / bf16
// queries x E4M3 / E5M2 pages; whole and split tiles).
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"

namespace pkv::prefill::internal {
namespace {

template <typename T, typename Kv>
const void* Kernel(bool split) {
  return split ? reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<T, 64, Kv, true>)
               : reinterpret_cast<const void*>(&dev::PrefillAttentionKernel<T, 64, Kv>);
}

template <typename T>
const void* ForKv(KvCacheDtype kv, bool split) {
  return kv == KvCacheDtype::kFp8E4M3 ? Kernel<T, decode::dev::KvE4M3>(split)
                                      : Kernel<T, decode::dev::KvE5M2>(split);
}

}  // namespace

const void* PrefillKernelFp8D64(decode::DType dtype, KvCacheDtype kv, bool split) {
  return dtype == decode::DType::kFloat16 ? ForKv<__half>(kv, split)
                                          : ForKv<__nv_bfloat16>(kv, split);
}

}  // namespace pkv::prefill::internal
