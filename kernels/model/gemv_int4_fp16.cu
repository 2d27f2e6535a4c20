// The fused GEMV kernels for 4-bit weights with fp16 activations (gemv_kernel.cuh,
// gemv_weights.cuh).
#include "kernels/model/gemv_kernel.cuh"

namespace pkv::gpu::gemv {

template absl::Status LaunchGemvTyped<__half, Int4Weights>(const GemvArgs& a, cudaStream_t stream);
template absl::Status GemvCtasPerSm<__half, Int4Weights>(int stage_optin, int* ctas,
                                                         int* static_smem);

}  // namespace pkv::gpu::gemv
