// Runs the benchmark on a slice of the GPU's SMs (issue 8's consumer-GPU regime on an H200).
// Preferred: a CUDA green context holding `requested` SMs (cuDevSmResourceSplitByCount +
// cuGreenCtxCreate), made current on the calling thread, and a stream of it: every kernel then
// runs on those SMs only. If that fails at run time, the fallback is a plain stream and the caller
// caps every grid to sm_count * ctas_per_sm resident CTAs (PlanOptions::max_grid_ctas), which
// limits concurrency but not which SMs run them; mode() says which one is in force.
// Not thread-safe: owns the calling thread's current context while it lives.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pkv::bench {

class SmPartition {
 public:
  // requested <= 0: the whole GPU.
  static absl::StatusOr<std::unique_ptr<SmPartition>> Create(int requested);
  ~SmPartition();
  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;

  cudaStream_t stream() const { return stream_; }
  int sm_count() const { return sm_count_; }
  const std::string& mode() const { return mode_; }  // "all", "green" or "capped"
  const std::string& note() const { return note_; }  // why the fallback was taken

 private:
  SmPartition() = default;
  absl::Status TryGreen(int requested);

  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
  std::string mode_ = "all";
  std::string note_;
  void* green_ = nullptr;    // CUgreenCtx
  void* primary_ = nullptr;  // CUcontext current before the green one
};

}  // namespace pkv::bench
