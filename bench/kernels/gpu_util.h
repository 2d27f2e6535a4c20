// GPU helpers of `pkv-bench kernels`: the streaming-read bandwidth reference and the empty-launch
// floor; random fill, L2 flushing and CUDA-event timing come from kernels/policy/route_timer.h.
// Benchmark code: may allocate.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/policy/route_timer.h"

namespace pkv::bench {

// Shared with the worker's on-start policy calibration (kernels/policy/route_timer.h): the random
// fill, the L2 flusher and percentiles.
using policy::FillRandom16;
using policy::FillRandomFp8;
using policy::L2Flusher;
using policy::Percentile;

// Read-only kernel over a `bytes` buffer (16-byte loads, several in flight per thread): the
// bandwidth every route is compared with. Median of `reps` event-timed runs, GB/s (1e9 B/s).
absl::StatusOr<double> MeasureStreamReadGBps(int64_t bytes, int reps, cudaStream_t stream);

struct LaunchFloor {
  double one_us = 0, two_us = 0;              // 1 / 2 dependent empty kernels, CUDA events
  double one_graph_us = 0, two_graph_us = 0;  // the same captured in a CUDA graph, replayed
};
absl::StatusOr<LaunchFloor> MeasureLaunchFloor(int reps, cudaStream_t stream);

}  // namespace pkv::bench
