// SiLU * mul over the fused gate/up projection: a grid-stride elementwise kernel.
#include <algorithm>

#include "kernels/common/pdl.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {
namespace {

constexpr int kSiluThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kSiluThreads)
    SiluMulKernel(const T* gate_up, int64_t num_tokens, int32_t inter, T* out) {
  // grid.x covers one token's `inter` columns, grid.y strides over tokens: no division per element.
  PdlWait();
  PdlTrigger();
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= inter) return;
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const T* row = gate_up + t * 2 * inter;
    const float g = dev::ToF(row[j]), u = dev::ToF(row[inter + j]);
    out[t * inter + j] = dev::FromF<T>(g / (1.f + expf(-g)) * u);
  }
}

}  // namespace

absl::Status LaunchSiluMul(DType dtype, const void* gate_up, int64_t num_tokens, int32_t inter,
                           void* out, cudaStream_t stream, bool pdl) {
  if (inter <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("silu: intermediate size ", inter));
  }
  if (num_tokens <= 0) return absl::OkStatus();
  const dim3 grid((inter + kSiluThreads - 1) / kSiluThreads,
                  static_cast<unsigned>(std::min<int64_t>(num_tokens, 65535)));
  return DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        LaunchMaybePdl(SiluMulKernel<T>, grid, dim3(kSiluThreads), 0, stream, pdl,
                       static_cast<const T*>(gate_up), num_tokens, inter, static_cast<T*>(out)),
        "SiluMulKernel");
  });
}

}  // namespace pkv::gpu
