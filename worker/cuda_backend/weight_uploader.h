// Streams host checkpoint tensors into device memory for DeviceWeights (device_weights.h)
// through two pinned buffers: while one chunk is copied to the GPU, the next is converted into
// the other (to float32 or the 16-bit compute dtype), so an 8B checkpoint never needs a second
// host copy.
// Thread-safety: one thread per Uploader.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/decode/decode_params.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/model/checkpoint.h"

namespace pkv::cuda_backend {

// Converts n elements from `src` (dtype `from`) into `dst` (float32, or the 16-bit `to`).
void ConvertChunk(const uint8_t* src, DType from, int64_t n, bool to_f32, decode::DType to,
                  uint8_t* dst);

inline constexpr int64_t kStagingBytes = int64_t{32} << 20;  // per pinned staging buffer

class Uploader {
 public:
  Uploader() = default;
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;
  absl::Status Init(cudaStream_t stream) {
    stream_ = stream;
    for (int b = 0; b < 2; ++b) {
      PKV_ASSIGN_OR_RETURN(staging_[b], PinnedBuffer::Allocate(kStagingBytes));
      PKV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done_[b], cudaEventDisableTiming));
    }
    return absl::OkStatus();
  }
  ~Uploader() {
    for (cudaEvent_t e : done_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }

  absl::Status Copy(const TensorView& view, bool to_f32, decode::DType to, uint8_t* dst) {
    return CopyRuns(view, TensorRuns{0, 0, 1, view.numel()}, to_f32, to, dst);
  }

  // The elements `runs` selects from `view`, packed in order at dst.
  absl::Status CopyRuns(const TensorView& view, const TensorRuns& runs, bool to_f32,
                        decode::DType to, uint8_t* dst) {
    const int64_t out_elem = to_f32 ? 4 : 2;
    const int64_t in_elem = DTypeSize(view.dtype());
    const int64_t per_chunk = kStagingBytes / std::max(out_elem, in_elem);
    const int64_t total = runs.runs * runs.width;
    for (int64_t first = 0; first < total; first += per_chunk) {
      const int64_t n = std::min(per_chunk, total - first);
      PKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_[next_]));  // buffer free again
      for (int64_t e = first; e < first + n;) {  // the pieces of the runs this chunk covers
        const int64_t run = e / runs.width, offset = e % runs.width;
        const int64_t len = std::min(runs.width - offset, first + n - e);
        const int64_t src = runs.first + run * runs.stride + offset;
        ConvertChunk(view.bytes.data() + src * in_elem, view.dtype(), len, to_f32, to,
                     staging_[next_].bytes_ptr() + (e - first) * out_elem);
        e += len;
      }
      PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + first * out_elem, staging_[next_].get(),
                                               n * out_elem, cudaMemcpyHostToDevice, stream_));
      PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_[next_], stream_));
      next_ ^= 1;
    }
    return absl::OkStatus();
  }

 private:
  cudaStream_t stream_ = nullptr;
  PinnedBuffer staging_[2];
  cudaEvent_t done_[2] = {nullptr, nullptr};
  int next_ = 0;
};

}  // namespace pkv::cuda_backend
