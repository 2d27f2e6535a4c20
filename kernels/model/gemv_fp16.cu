// The fused GEMV kernels for fp16 weights (gemv_kernel.cuh); one file per dtype keeps the CUDA
// build parallel.
#include "kernels/model/gemv_kernel.cuh"

namespace pkv::gpu::gemv {

template absl::Status LaunchGemvTyped<__half>(const GemvArgs& a, cudaStream_t stream);
template absl::Status GemvCtasPerSm<__half>(int* ctas);

}  // namespace pkv::gpu::gemv
