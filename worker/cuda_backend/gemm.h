// The projections: y[T][N] = x[T][K] . w[N][K]^T with fp16/bf16 inputs and fp32 accumulation
// through cuBLAS (cublasGemmEx, tensor cores), output in the input dtype or float32. Row-major
// activations and nn.Linear-shaped weights map onto column-major cuBLAS as y^T = w . x^T, so no
// transpose is ever materialised.
//
// cuBLAS gets a fixed workspace (cublasSetWorkspace) so its calls can be captured in CUDA graphs
// and never allocate. Thread-safety: not thread-safe (one handle, owned by the backend).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv::cuda_backend {

class Gemm {
 public:
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(int64_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x [num_tokens][in] dtype, w [out][in] dtype, y [num_tokens][out] dtype or float32 (y_f32).
  // With the skinny kernel enabled, 1..kSkinnyGemmMaxTokens tokens go through it instead of
  // cuBLAS (kernels/model/model_kernels.h).
  absl::Status Linear(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                      const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream);

  void set_skinny(bool enabled) { skinny_ = enabled; }
  bool skinny() const { return skinny_; }

 private:
  Gemm() = default;
  bool skinny_ = false;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

// CUBLAS_STATUS -> absl::Status (INTERNAL naming the call).
absl::Status CublasStatus(cublasStatus_t st, const char* what);

}  // namespace pkv::cuda_backend
