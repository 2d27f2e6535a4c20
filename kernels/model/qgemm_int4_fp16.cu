// The quantized-weight GEMM for 4-bit weights with fp16 activations (qgemm_kernel.cuh).
#include "kernels/model/qgemm_kernel.cuh"

namespace pkv::gpu::qgemm {

template absl::Status LaunchQGemmTyped<__half, gemv::Int4Weights>(const QGemmArgs& a,
                                                                  cudaStream_t stream);

}  // namespace pkv::gpu::qgemm
