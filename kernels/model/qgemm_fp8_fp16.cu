// The quantized-weight GEMM for fp8 e4m3 weights with fp16 activations (qgemm_kernel.cuh).
#include "kernels/model/qgemm_kernel.cuh"

namespace pkv::gpu::qgemm {

template absl::Status LaunchQGemmTyped<__half, gemv::Fp8Weights>(const QGemmArgs& a,
                                                                 cudaStream_t stream);

}  // namespace pkv::gpu::qgemm
