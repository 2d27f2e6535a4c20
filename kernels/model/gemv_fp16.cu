// The fused GEMV kernels for dense fp16 weights (gemv_kernel.cuh); one file per (dtype, weight
// format) keeps the CUDA build parallel.
#include "kernels/model/gemv_kernel.cuh"

namespace pkv::gpu::gemv {

template absl::Status LaunchGemvTyped<__half, DenseWeights>(const GemvArgs& a, cudaStream_t stream);
template absl::Status GemvCtasPerSm<__half, DenseWeights>(int stage_optin, int* ctas,
                                                          int* static_smem);

}  // namespace pkv::gpu::gemv
