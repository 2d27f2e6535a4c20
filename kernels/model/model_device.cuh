// Device helpers shared by the model kernels: 16-bit <-> float conversion, block-wide sums and the
// one run-time dtype -> template dispatch of this folder.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/decode/decode_params.h"

namespace pkv::gpu::dev {

__device__ __forceinline__ float ToF(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T FromF(float x);
template <>
__device__ __forceinline__ __half FromF<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Sum over the block; every thread gets the result. `scratch` holds one float per warp.
// REQUIRES: every thread of the block calls it (it synchronises twice).
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < warps; ++w) total += scratch[w];  // fixed order: deterministic
  return total;
}

// Max over the block; every thread gets the result. Same contract as BlockSum.
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

}  // namespace pkv::gpu::dev

namespace pkv::gpu {

// Calls fn(T{}) with T = __half or __nv_bfloat16 (a generic lambda reads the type with
// decltype): the one run-time -> compile-time dtype dispatch of the model kernels.
template <typename Fn>
absl::Status DispatchDType(decode::DType dtype, Fn&& fn) {
  switch (dtype) {
    case decode::DType::kFloat16:
      return fn(__half{});
    case decode::DType::kBFloat16:
      return fn(__nv_bfloat16{});
  }
  return absl::InvalidArgumentError("model kernels: unsupported dtype; supported: fp16, bf16");
}

inline absl::Status CheckLaunch(const char* what) {
  return CudaStatus(cudaPeekAtLastError(), what);
}

}  // namespace pkv::gpu
