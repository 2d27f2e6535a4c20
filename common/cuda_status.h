// CUDA error -> absl::Status. Include only from CUDA-compiled sources (or sources that already
// include the CUDA runtime). A failed CUDA call is a backend failure: INTERNAL, except allocation
// failure which is RESOURCE_EXHAUSTED so a caller can shrink a pool and retry.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pkv {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code = err == cudaErrorMemoryAllocation
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(
      code, absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace pkv

// Returns a Status from the enclosing function when the CUDA call fails.
#define PKV_CUDA_RETURN_IF_ERROR(call)                                                \
  do {                                                                                \
    cudaError_t pkv_cuda_err_ = (call);                                               \
    if (pkv_cuda_err_ != cudaSuccess) return ::pkv::CudaStatus(pkv_cuda_err_, #call); \
  } while (0)

// After a kernel launch: reports launch-configuration errors without synchronising.
#define PKV_CUDA_RETURN_IF_LAUNCH_ERROR(what) PKV_CUDA_RETURN_IF_ERROR(cudaPeekAtLastError())
