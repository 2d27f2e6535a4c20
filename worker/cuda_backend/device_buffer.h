// Owning handles of device memory (cudaMalloc) and pinned host memory (cudaMallocHost), so every
// buffer of the backend is freed exactly once, in reverse order of creation. Move-only.
// Thread-safety: plain owners; the CUDA calls themselves are thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "common/cuda_status.h"

namespace pkv::cuda_backend {

template <bool kPinned>
class CudaMemory {
 public:
  CudaMemory() = default;
  ~CudaMemory() { Reset(); }
  CudaMemory(CudaMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  // RESOURCE_EXHAUSTED when the allocation fails. Zero bytes gives an empty handle.
  static absl::StatusOr<CudaMemory> Allocate(int64_t bytes) {
    CudaMemory m;
    if (bytes <= 0) return m;
    const cudaError_t err = kPinned ? cudaMallocHost(&m.ptr_, static_cast<size_t>(bytes))
                                    : cudaMalloc(&m.ptr_, static_cast<size_t>(bytes));
    if (err != cudaSuccess) {
      m.ptr_ = nullptr;
      return CudaStatus(err, kPinned ? "cudaMallocHost" : "cudaMalloc");
    }
    m.bytes_ = bytes;
    return m;
  }

  // Device memory only: Allocate, then zeroed on `stream` (enqueued, not waited for).
  static absl::StatusOr<CudaMemory> AllocateZeroed(int64_t bytes, cudaStream_t stream) {
    static_assert(!kPinned, "pinned memory is zeroed on the host");
    absl::StatusOr<CudaMemory> m = Allocate(bytes);
    if (m.ok() && bytes > 0) {
      const cudaError_t err = cudaMemsetAsync(m->get(), 0, static_cast<size_t>(bytes), stream);
      if (err != cudaSuccess) return CudaStatus(err, "cudaMemsetAsync");
    }
    return m;
  }

  void* get() const { return ptr_; }
  uint8_t* bytes_ptr() const { return static_cast<uint8_t*>(ptr_); }
  int64_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (ptr_ == nullptr) return;
    if (kPinned) {
      cudaFreeHost(ptr_);
    } else {
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
  }

  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<false>;
using PinnedBuffer = CudaMemory<true>;

}  // namespace pkv::cuda_backend
