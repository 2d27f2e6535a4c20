// The quantized-weight GEMM for 4-bit weights with bf16 activations (qgemm_kernel.cuh).
#include "kernels/model/qgemm_kernel.cuh"

namespace pkv::gpu::qgemm {

template absl::Status LaunchQGemmTyped<__nv_bfloat16, gemv::Int4Weights>(const QGemmArgs& a,
                                                                         cudaStream_t stream);

}  // namespace pkv::gpu::qgemm
