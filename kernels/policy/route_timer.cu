#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/policy/route_timer.h"

namespace pkv::policy {
namespace {

__device__ __forceinline__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void FillFp8Kernel(uint8_t* dst, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    // 0xb7 clears bit 6 (the exponent's top bit in both formats) and bit 3.
    dst[i] =
        static_cast<uint8_t>(Hash(static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull + seed) & 0xb7u);
  }
}

__global__ void FillKernel(uint16_t* dst, int64_t n, uint32_t seed, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u =
        (Hash(static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull + seed) >> 8) * (2.f / 16777216.f) -
        1.f;
    if (bf16) {
      __nv_bfloat16 b = __float2bfloat16_rn(u);
      dst[i] = *reinterpret_cast<uint16_t*>(&b);
    } else {
      __half h = __float2half_rn(u);
      dst[i] = *reinterpret_cast<uint16_t*>(&h);
    }
  }
}

// Four independent 16-byte loads in flight per thread per iteration.
__global__ void StreamReadKernel(const uint4* __restrict__ p, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride);
    const uint4 c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) acc ^= __ldcs(p + i).x;
  if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads; practically never true
}

}  // namespace

absl::Status FillRandom16(void* dst, int64_t n, uint32_t seed, bool bf16, cudaStream_t stream) {
  FillKernel<<<2048, 256, 0, stream>>>(static_cast<uint16_t*>(dst), n, seed, bf16);
  PKV_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status FillRandomFp8(void* dst, int64_t n, uint32_t seed, cudaStream_t stream) {
  FillFp8Kernel<<<2048, 256, 0, stream>>>(static_cast<uint8_t*>(dst), n, seed);
  PKV_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchStreamRead(const void* buf, int64_t bytes, uint32_t* sink, int grid, int block,
                              cudaStream_t stream) {
  StreamReadKernel<<<grid, block, 0, stream>>>(static_cast<const uint4*>(buf), bytes / 16, sink);
  PKV_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<L2Flusher>> L2Flusher::Create(int64_t bytes, bool write) {
  std::unique_ptr<L2Flusher> f(new L2Flusher());
  f->bytes_ = bytes;
  f->write_ = write;
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->buf_, bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&f->sink_, 4));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(f->buf_, 1, bytes));
  return f;
}

L2Flusher::~L2Flusher() {
  cudaFree(buf_);
  cudaFree(sink_);
}

absl::Status L2Flusher::Flush(cudaStream_t stream) {
  if (write_) {
    value_ = (value_ + 1) & 0x7f;
    PKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buf_, value_, bytes_, stream));
    return absl::OkStatus();
  }
  return LaunchStreamRead(buf_, bytes_, sink_, 1024, 512, stream);
}

absl::StatusOr<std::unique_ptr<EventTimer>> EventTimer::Create(int max_iters) {
  std::unique_ptr<EventTimer> t(new EventTimer());
  t->events_.resize(2 * std::max(max_iters, 1), nullptr);
  for (cudaEvent_t& e : t->events_) PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  return t;
}

EventTimer::~EventTimer() {
  for (cudaEvent_t e : events_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
}

absl::StatusOr<std::vector<double>> EventTimer::Time(
    int iters, L2Flusher* flusher, cudaStream_t stream,
    const std::function<absl::Status(int)>& prepare,
    const std::function<absl::Status(int)>& launch) {
  if (iters < 1 || 2 * iters > static_cast<int>(events_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("event timer: ", iters, " iterations, room for ", events_.size() / 2));
  }
  for (int it = 0; it < iters; ++it) {
    PKV_RETURN_IF_ERROR(prepare(it));
    if (flusher != nullptr) PKV_RETURN_IF_ERROR(flusher->Flush(stream));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2 * it], stream));
    PKV_RETURN_IF_ERROR(launch(it));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2 * it + 1], stream));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  std::vector<double> us(iters);
  for (int it = 0; it < iters; ++it) {
    float ms = 0;
    PKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[2 * it], events_[2 * it + 1]));
    us[it] = ms * 1e3;
  }
  return us;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace pkv::policy
