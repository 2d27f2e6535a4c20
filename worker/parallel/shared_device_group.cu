// The one kernel of SharedDeviceGroup (slice_sum.h): a rank's slice of an all-reduce over buffers
// of one GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "worker/parallel/slice_sum.h"

namespace pkv {
namespace {

constexpr int kThreads = 256;

struct SliceSumParams {
  void* data[kMaxSliceSumRanks];  // [n] rank buffers
  int n;
  int64_t begin;
  int64_t end;
};

__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ float Load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ void Store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Rank order, float32 accumulation, one rounding: the same bits whichever rank computes it.
template <typename T>
__global__ void SliceSumKernel(SliceSumParams p) {
  for (int64_t i = p.begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.end;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = Load(static_cast<const T*>(p.data[0]) + i);
    for (int q = 1; q < p.n; ++q) sum += Load(static_cast<const T*>(p.data[q]) + i);
    for (int q = 0; q < p.n; ++q) Store(static_cast<T*>(p.data[q]) + i, sum);
  }
}

}  // namespace

absl::Status LaunchSharedSliceSum(void* const* data, int n, int64_t begin, int64_t end,
                                  CollectiveDType type, cudaStream_t stream) {
  if (n < 1 || n > kMaxSliceSumRanks) {
    return absl::InvalidArgumentError(absl::StrCat("slice sum over ", n, " ranks"));
  }
  if (end <= begin) return absl::OkStatus();
  SliceSumParams p{};
  for (int q = 0; q < n; ++q) p.data[q] = data[q];
  p.n = n;
  p.begin = begin;
  p.end = end;
  const int blocks =
      static_cast<int>(std::min<int64_t>((end - begin + kThreads - 1) / kThreads, 1024));
  switch (type) {
    case CollectiveDType::kFloat32:
      SliceSumKernel<float><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case CollectiveDType::kFloat16:
      SliceSumKernel<__half><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case CollectiveDType::kBFloat16:
      SliceSumKernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(p);
      break;
  }
  return CudaStatus(cudaPeekAtLastError(), "SliceSumKernel");
}

}  // namespace pkv
