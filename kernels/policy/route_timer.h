// GPU timing of decode routes, the method of `pkv-bench kernels` (bench/NOTES.md, "Method"),
// shared by that benchmark and the worker's on-start policy calibration (on_start_calibration.h)
// so both measure the same thing: before each iteration the step's plan is uploaded and the L2 is
// flushed by reading a buffer larger than it; CUDA events bracket the launches only; the median
// over the iterations is the route's time. CUDA builds only. Benchmark-side code: may allocate.
// Thread-safety: not thread-safe; every object is used by one thread with one stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pkv::policy {

// n 16-bit values (fp16 or bf16 bits) uniform in [-1, 1), from a hash of (index, seed).
absl::Status FillRandom16(void* dst, int64_t n, uint32_t seed, bool bf16, cudaStream_t stream);
// n random FP8 codes with exponent field's top bit clear: finite in both E4M3 (|x| < 2) and
// E5M2 (|x| < 2^1), never NaN or inf.
absl::Status FillRandomFp8(void* dst, int64_t n, uint32_t seed, cudaStream_t stream);

// One read-only sweep of `bytes` (a multiple of 16) at buf with 16-byte streaming loads, four in
// flight per thread; `sink` (4 bytes of device memory) keeps the loads alive.
absl::Status LaunchStreamRead(const void* buf, int64_t bytes, uint32_t* sink, int grid, int block,
                              cudaStream_t stream);

// Streams a buffer larger than the L2 through it so the next kernel starts with a cold cache.
// Read mode (default) leaves the L2 full of clean lines of the flush buffer, as the FlashInfer
// reference measurement did (256 MiB read). Write mode (a memset) leaves up to an L2 of dirty
// lines that the timed kernel then has to write back: ~60 MB at ~4 TB/s, ~10 us on an H200.
class L2Flusher {
 public:
  // The CUDA error (RESOURCE_EXHAUSTED when out of memory) when the buffer cannot be allocated.
  static absl::StatusOr<std::unique_ptr<L2Flusher>> Create(int64_t bytes, bool write);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  absl::Status Flush(cudaStream_t stream);

 private:
  L2Flusher() = default;
  void* buf_ = nullptr;
  uint32_t* sink_ = nullptr;
  int64_t bytes_ = 0;
  bool write_ = false;
  int value_ = 0;
};

// CUDA-event timing of `iters` iterations: for each, prepare(it) (e.g. the plan upload), the L2
// flush (when a flusher is given), an event, launch(it), an event; one synchronisation at the end.
class EventTimer {
 public:
  static absl::StatusOr<std::unique_ptr<EventTimer>> Create(int max_iters);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // GPU time of each iteration's launch(it), microseconds. INVALID_ARGUMENT if iters exceeds
  // max_iters; the first failing callback's status otherwise.
  absl::StatusOr<std::vector<double>> Time(int iters, L2Flusher* flusher, cudaStream_t stream,
                                           const std::function<absl::Status(int)>& prepare,
                                           const std::function<absl::Status(int)>& launch);

 private:
  EventTimer() = default;
  std::vector<cudaEvent_t> events_;  // [2 * max_iters]
};

// Median / percentile of a sample (copied); 0 for an empty one.
double Percentile(std::vector<double> v, double q);

}  // namespace pkv::policy
