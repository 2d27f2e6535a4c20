// The fused GEMV kernels for fp8 e4m3 weights with fp16 activations (gemv_kernel.cuh,
// gemv_weights.cuh).
#include "kernels/model/gemv_kernel.cuh"

namespace pkv::gpu::gemv {

template absl::Status LaunchGemvTyped<__half, Fp8Weights>(const GemvArgs& a, cudaStream_t stream);
template absl::Status GemvCtasPerSm<__half, Fp8Weights>(int stage_optin, int* ctas,
                                                        int* static_smem);

}  // namespace pkv::gpu::gemv
