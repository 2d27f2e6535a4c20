// Instantiated CUDA graphs of decode steps, keyed by (batch bucket, decode-plan launch signature).
// Capture records the enqueue function's work on the stream without running it; Launch replays it.
// Kernels inside read their per-step data (token ids, positions, block tables, plan, sampling
// parameters) from fixed device buffers the host refills before each replay.
// Thread-safety: not thread-safe (owned by the backend).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace pkv::cuda_backend {

class GraphCache {
 public:
  GraphCache() = default;
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  static uint64_t Key(int32_t bucket, uint64_t signature) {
    return signature * 1099511628211ull ^ static_cast<uint64_t>(bucket);
  }

  // nullptr when no graph was captured under `key`.
  cudaGraphExec_t Find(uint64_t key) const;

  // Captures everything `enqueue` puts on `stream` (which must be idle of other capture) and
  // instantiates it under `key`. On failure the stream is left out of capture mode and nothing is
  // stored.
  absl::StatusOr<cudaGraphExec_t> Capture(uint64_t key, cudaStream_t stream,
                                          absl::FunctionRef<absl::Status()> enqueue);

  int size() const { return static_cast<int>(execs_.size()); }

 private:
  absl::flat_hash_map<uint64_t, cudaGraphExec_t> execs_;
};

}  // namespace pkv::cuda_backend
