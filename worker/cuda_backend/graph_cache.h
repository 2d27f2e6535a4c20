// Instantiated CUDA graphs of decode steps, keyed by (batch bucket, signature of everything a
// capture bakes in), and the policy of when to capture. Capture records the enqueue function's
// work on the stream without running it; a replay launches it. Kernels inside read their per-step
// data (token ids, positions, block tables, plan, sampling parameters) from fixed device buffers
// the host refills before each replay.
//
// Policy (Run): a key runs eagerly once first, so lazy module loading and cuBLAS's first-call
// set-up happen outside capture; its next use captures and replays; a key whose capture failed
// stays eager for the life of the cache.
// Thread-safety: not thread-safe (owned by the backend).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
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

  // Puts `enqueue`'s work for (bucket, signature) on `stream` by the policy above: replays the
  // captured graph, captures it (a failed capture is logged and the work runs eagerly), or runs
  // it eagerly. Returns whether a graph was launched.
  absl::StatusOr<bool> Run(int32_t bucket, uint64_t signature, cudaStream_t stream,
                           absl::FunctionRef<absl::Status()> enqueue);

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
  absl::flat_hash_set<uint64_t> warm_;          // keys run eagerly once (capture on the next use)
  absl::flat_hash_set<uint64_t> uncapturable_;  // keys whose capture failed: stay eager
};

}  // namespace pkv::cuda_backend
