// The fused GEMV kernels for 4-bit weights with bf16 activations (gemv_kernel.cuh,
// gemv_weights.cuh).
#include "kernels/model/gemv_kernel.cuh"

namespace pkv::gpu::gemv {

template absl::Status LaunchGemvTyped<__nv_bfloat16, Int4Weights>(const GemvArgs& a,
                                                                  cudaStream_t stream);
template absl::Status GemvCtasPerSm<__nv_bfloat16, Int4Weights>(int stage_optin, int* ctas,
                                                                int* static_smem);

}  // namespace pkv::gpu::gemv
