// Hash-based random fill (SplitMix64 of seed and index): reproducible, any size, no host data.
#include <algorithm>
#include <type_traits>

#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {
namespace {

constexpr int kFillThreads = 256;

__device__ __forceinline__ float HashUniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;  // [0, 1)
}

template <typename T>
__global__ void FillRandomKernel(T* dst, int64_t n, uint64_t seed, float lo, float width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = lo + width * HashUniform(seed, static_cast<uint64_t>(i));
    if constexpr (std::is_same_v<T, float>) {
      dst[i] = v;
    } else {
      dst[i] = dev::FromF<T>(v);
    }
  }
}

}  // namespace

absl::Status LaunchFillRandom(void* dst, int64_t n, bool f32, DType dtype, uint64_t seed,
                              float center, float half_width, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  const int blocks =
      static_cast<int>(std::min<int64_t>((n + kFillThreads - 1) / kFillThreads, int64_t{1} << 16));
  const float lo = center - half_width, width = 2.f * half_width;
  if (f32) {
    FillRandomKernel<float>
        <<<blocks, kFillThreads, 0, stream>>>(static_cast<float*>(dst), n, seed, lo, width);
    return CheckLaunch("FillRandomKernel");
  }
  return DispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    FillRandomKernel<T>
        <<<blocks, kFillThreads, 0, stream>>>(static_cast<T*>(dst), n, seed, lo, width);
    return CheckLaunch("FillRandomKernel");
  });
}

}  // namespace pkv::gpu
