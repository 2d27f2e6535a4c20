// GPU helpers of `pkv-bench kernels`: random fill, the streaming-read bandwidth reference, the
// empty-launch floor, L2 flushing and CUDA-event timing. Benchmark code: may allocate.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pkv::bench {

// n 16-bit values (fp16 or bf16 bits) uniform in [-1, 1), from a hash of (index, seed).
absl::Status FillRandom16(void* dst, int64_t n, uint32_t seed, bool bf16, cudaStream_t stream);

// Read-only kernel over a `bytes` buffer (16-byte loads, several in flight per thread): the
// bandwidth every route is compared with. Median of `reps` event-timed runs, GB/s (1e9 B/s).
absl::StatusOr<double> MeasureStreamReadGBps(int64_t bytes, int reps, cudaStream_t stream);

struct LaunchFloor {
  double one_us = 0, two_us = 0;              // 1 / 2 dependent empty kernels, CUDA events
  double one_graph_us = 0, two_graph_us = 0;  // the same captured in a CUDA graph, replayed
};
absl::StatusOr<LaunchFloor> MeasureLaunchFloor(int reps, cudaStream_t stream);

// Streams a buffer larger than the L2 through it so the next kernel starts with a cold cache.
// Read mode (default) leaves the L2 full of clean lines of the flush buffer, as the FlashInfer
// reference measurement did (256 MiB read). Write mode (a memset) leaves up to an L2 of dirty
// lines that the timed kernel then has to write back: ~60 MB at ~4 TB/s, ~10 us on an H200.
class L2Flusher {
 public:
  L2Flusher(int64_t bytes, bool write);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  absl::Status Flush(cudaStream_t stream);

 private:
  void* buf_ = nullptr;
  uint32_t* sink_ = nullptr;
  int64_t bytes_ = 0;
  bool write_ = false;
  int value_ = 0;
};

// Median / percentile of a sample (copied).
double Percentile(std::vector<double> v, double q);

}  // namespace pkv::bench
