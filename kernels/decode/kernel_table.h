// The compiled decode kernels of one head dim, one getter per instantiation file
// (decode_kernels_d{64,128,256}.cu keep each file's compile small and parallel). Only
// decode_launch.cu's SelectKernels may call these: it is the one run-time -> compile-time dispatch.
#pragma once

#include "kernels/common/fp8.h"
#include "kernels/decode/decode_params.h"

namespace pkv::decode::internal {

struct KernelPair {
  const void* attention = nullptr;  // __global__ void(DecodeParams)
  const void* merge = nullptr;      // __global__ void(DecodeParams)
};

KernelPair KernelsD64(DType dtype);
KernelPair KernelsD128(DType dtype);
KernelPair KernelsD256(DType dtype);
// FP8 pages (decode_kernels_fp8_d*.cu): the attention kernel only; the merge is KV-agnostic.
const void* Fp8AttentionD64(DType dtype, Fp8Format format);
const void* Fp8AttentionD128(DType dtype, Fp8Format format);
const void* Fp8AttentionD256(DType dtype, Fp8Format format);

}  // namespace pkv::decode::internal
