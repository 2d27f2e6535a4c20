// The compiled prefill-attention kernels, one function per head dim (each in its own .cu file so
// the CUDA build stays parallel). Internal to kernels/prefill.
#pragma once

#include "kernels/decode/decode_params.h"

namespace pkv::prefill::internal {

// The kernel for (head_dim, dtype) as a pointer for cudaLaunchKernel / cudaFuncSetAttribute.
const void* PrefillKernelD64(decode::DType dtype);
const void* PrefillKernelD128(decode::DType dtype);

}  // namespace pkv::prefill::internal
