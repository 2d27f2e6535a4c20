// The compiled prefill-attention kernels, one function per head dim and page kind (each in its own
// .cu file so the CUDA build stays parallel). Internal to kernels/prefill.
#pragma once

#include "kernels/attention/fp8_kv.h"
#include "kernels/decode/decode_params.h"

namespace pkv::prefill::internal {

// The kernel for (head_dim, dtype) as a pointer for cudaLaunchKernel / cudaFuncSetAttribute;
// split: the split-tile instantiation (prefill_attention.cuh).
const void* PrefillKernelD64(decode::DType dtype, bool split);
const void* PrefillKernelD128(decode::DType dtype, bool split);
// The FP8-page kernels. REQUIRES: IsFp8(kv).
const void* PrefillKernelFp8D64(decode::DType dtype, KvCacheDtype kv, bool split);
const void* PrefillKernelFp8D128(decode::DType dtype, KvCacheDtype kv, bool split);
// The split tiles' merge kernel (its output dtype is the queries').
const void* PrefillSplitMergeKernelD64(decode::DType dtype);
const void* PrefillSplitMergeKernelD128(decode::DType dtype);

}  // namespace pkv::prefill::internal
