// The compiled decode kernels of one head dim, one getter per instantiation file
// (decode_kernels_d{64,128,256}.cu keep each file's compile small and parallel). Only
// decode_launch.cu's SelectKernels may call these: it is the one run-time -> compile-time dispatch.
#pragma once

#include "kernels/decode/decode_params.h"

namespace pkv::decode::internal {

struct KernelPair {
  const void* attention = nullptr;  // __global__ void(DecodeParams)
  const void* merge = nullptr;      // __global__ void(DecodeParams)
};

KernelPair KernelsD64(DType dtype);
KernelPair KernelsD128(DType dtype);
KernelPair KernelsD256(DType dtype);

}  // namespace pkv::decode::internal
