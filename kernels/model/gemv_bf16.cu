// The fused GEMV kernels for bf16 weights (gemv_kernel.cuh); one file per dtype keeps the CUDA
// build parallel.
#include "kernels/model/gemv_kernel.cuh"

namespace pkv::gpu::gemv {

template absl::Status LaunchGemvTyped<__nv_bfloat16>(const GemvArgs& a, cudaStream_t stream);
template absl::Status GemvCtasPerSm<__nv_bfloat16>(int* ctas);

}  // namespace pkv::gpu::gemv
