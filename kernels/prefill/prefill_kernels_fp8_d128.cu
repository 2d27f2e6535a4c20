// Instantiations of the prefill-attention kernel over FP8 pages for head_dim 128 (fp16 / bf16
// queries x E4M3 / E5M2 pages).
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"

namespace pkv::prefill::internal {
namespace {

template <typename T>
const void* ForKv(KvCacheDtype kv) {
  return kv == KvCacheDtype::kFp8E4M3
             ? reinterpret_cast<const void*>(
                   &dev::PrefillAttentionKernel<T, 128, decode::dev::KvE4M3>)
             : reinterpret_cast<const void*>(
                   &dev::PrefillAttentionKernel<T, 128, decode::dev::KvE5M2>);
}

}  // namespace

const void* PrefillKernelFp8D128(decode::DType dtype, KvCacheDtype kv) {
  return dtype == decode::DType::kFloat16 ? ForKv<__half>(kv) : ForKv<__nv_bfloat16>(kv);
}

}  // namespace pkv::prefill::internal
