// The model backend's use of the decode-attention engine (kernels/decode): one plan per step,
// launched once per layer. Plans are always graph-sized for the step's batch bucket
// (PlanOptions::capacity_rows), so an eager mixed step and a replayed CUDA graph run the same
// launches; each bucket owns its device workspace (counters zeroed once) and its pinned plan image,
// all allocated at start-up.
//
// The route comes from ChooseDecodeRoute, the single call site where the adaptive policy (issue 8)
// plugs in; until then it is the engine's default route.
// Thread-safety: not thread-safe (owned by the backend, scheduler thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/decode/decode_launch.h"
#include "kernels/decode/plan.h"
#include "kernels/decode/workspace.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv::cuda_backend {

// The route for a decode batch with these KV lengths. Today: the planner's default route
// (workqueue: only non-empty split items, exact per-row split counts), which is correct for every
// batch; issue 8's policy replaces this body with a choice from the batch features.
decode::Route ChooseDecodeRoute(const int32_t* lengths, int32_t num_rows);

class DecodeAttention {
 public:
  // Whether the engine supports this shape (head dim 64/128/256, group 1..8, page size 1..128).
  static bool Supports(const KvShape& shape);

  // Configures the kernels, queries the device limits and allocates one workspace per bucket.
  static absl::StatusOr<std::unique_ptr<DecodeAttention>> Create(
      const KvShape& shape, decode::DType dtype, const std::vector<int32_t>& buckets, int device);

  // Plans the step's decode rows for `bucket` (one of the construction buckets, >= num_rows) and
  // enqueues the plan upload on `stream`. lengths [num_rows], page_indptr [num_rows + 1] (host).
  absl::Status Prepare(const int32_t* lengths, const int32_t* page_indptr, int32_t num_rows,
                       int32_t bucket, cudaStream_t stream);

  // One layer's attention for the prepared plan. q/out [rows][H_q][D]; page_ids on the device.
  absl::Status Launch(const void* q, const void* k_cache, const void* v_cache,
                      const int32_t* page_ids, void* out, float scale, cudaStream_t stream) const;

  const decode::DecodePlan& plan() const { return plan_; }
  // Identifies the prepared plan's launch sequence: two plans with equal signatures replay the
  // same captured graph.
  uint64_t LaunchSignature() const;
  int64_t workspace_bytes() const;

 private:
  struct Bucket {
    int32_t rows = 0;
    decode::PlanSizes caps;
    DeviceBuffer workspace;
    PinnedBuffer image;
  };
  DecodeAttention() = default;

  KvShape shape_;
  decode::DType dtype_ = decode::DType::kBFloat16;
  decode::KernelConfig config_;
  decode::DeviceLimits limits_;
  std::vector<Bucket> buckets_;
  const Bucket* current_ = nullptr;
  decode::WorkspaceLayout layout_;  // the prepared plan's layout (filling mode)
  decode::DecodePlan plan_;
};

}  // namespace pkv::cuda_backend
