// The model backend's use of the decode-attention engine (kernels/decode): one plan per step,
// launched once per layer. Plans are always graph-sized for the step's batch bucket
// (PlanOptions::capacity_rows), so an eager mixed step and a replayed CUDA graph run the same
// launches; each bucket owns its device workspace (counters zeroed once) and its pinned plan image,
// all allocated at start-up.
//
// The route comes from the decode-route policy (kernels/policy, issue 8), chosen per step in
// Prepare from the batch's features: the single call site of the policy. The policy is loaded
// once in Create (policy file, per-GPU file, or an on-start calibration; policy_loader.h).
// Thread-safety: not thread-safe (owned by the backend, scheduler thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/decode/decode_launch.h"
#include "kernels/decode/plan.h"
#include "kernels/decode/workspace.h"
#include "kernels/policy/route_policy.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv::cuda_backend {

// Where the decode-route policy comes from (kernels/policy/policy_loader.h).
struct DecodePolicyOptions {
  std::string policy_file;              // explicit file; empty: <policy_dir>/<gpu>-<sms>sm.json
  std::string policy_dir = "policies";  // per-GPU policy files and the on-start calibration cache
  std::string kind;                     // learned | threshold | fixed:<route>; empty: the file's
  double calibration_budget_s = 30.0;   // on-start calibration when no file fits this GPU
  bool few_row_w8 = false;  // CudaBackendOptions::decode_few_row_w8 (its default is there)
};

// Steps of at most this many decode rows plan no split of fewer than kSmallStepMinSplitKvElems
// K+V elements (decode::PlanOptions::min_split_kv_elems): their attention runs inside the layer's
// PDL chain (kPdlAttentionMaxTokens in forward.h), latency-bound, where a split's fixed cost
// dominates. The floor is the policy's 128 tokens at head dim 128; at head dim 64 it doubles the
// split. Measured on the H200 (results/2026-12-03-h200-splitmap, -minsplit): 1B B=1 at 4096
// tokens 4.2% faster a whole step; B = 2..8 and 1k / 16k rows unchanged. Not yet at lengths just
// past a power of two (served 4097-4352: final10), where the planner's power-of-two length bucket
// halves the split again (ChooseSplitCount).
inline constexpr int32_t kSmallStepMaxRows = 8;
inline constexpr int64_t kSmallStepMinSplitKvElems = 128 * 128 * 2;

class DecodeAttention {
 public:
  // Whether the engine supports this shape (head dim 64/128/256, group 1..8, page size 1..128).
  static bool Supports(const KvShape& shape);

  // Configures the kernels, queries the device limits, loads (or calibrates) the route policy and
  // allocates one workspace per bucket. Call before the KV pool takes the free memory: an
  // on-start calibration allocates (and frees) its own buffers. FP8 pages (IsFp8(kv_dtype)):
  // shape.kv_elem_bytes must be 1; the planner's byte model and the occupancy count FP8 bytes,
  // while the route policy is the 16-bit one (policy files are calibrated over 16-bit pages; an
  // FP8 calibration is issue 16's open item), fed the 16-bit shape so its features mean what
  // they meant when it was fitted.
  static absl::StatusOr<std::unique_ptr<DecodeAttention>> Create(
      const KvShape& shape, decode::DType dtype, const std::vector<int32_t>& buckets, int device,
      const DecodePolicyOptions& policy_options = {}, KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

  // Plans the step's decode rows for `bucket` (one of the construction buckets, >= num_rows) and
  // enqueues the plan upload on `stream`. lengths [num_rows], page_indptr [num_rows + 1] (host);
  // page_ids: the host copy of the block table the launches read (the plan then carries each
  // item's first page ids), or nullptr.
  absl::Status Prepare(const int32_t* lengths, const int32_t* page_indptr, int32_t num_rows,
                       int32_t bucket, cudaStream_t stream, const int32_t* page_ids = nullptr);

  // One layer's attention for the prepared plan. q/out [rows][H_q][D]; page_ids on the device;
  // kv_scales: the layer's FP8 dequantization scales (ignored for 16-bit pages); pdl: a
  // programmatic dependent launch (decode::LaunchDecode).
  absl::Status Launch(const void* q, const void* k_cache, const void* v_cache,
                      const int32_t* page_ids, void* out, float scale, const Fp8KvScales& kv_scales,
                      cudaStream_t stream, bool pdl) const;

  const decode::DecodePlan& plan() const { return plan_; }
  // The workqueue route's layout for the next plans (decode::PlanOptions::workqueue_balanced);
  // off: the wave model, the baseline `pkv-bench e2e`'s "+waves" variants measure against.
  void set_workqueue_balanced(bool on) { workqueue_balanced_ = on; }
  // DecodePolicyOptions::few_row_w8 for the next plans; turning it on takes effect only where
  // Create had it on (the w8s3 config's limits are set up there).
  void set_few_row_w8(bool on) { few_row_w8_ = on; }
  // The policy's last choice (route, split parameters, predicted GPU time).
  const policy::RouteChoice& last_choice() const { return choice_; }
  // Identifies the prepared plan's launch sequence: two plans with equal signatures replay the
  // same captured graph.
  uint64_t LaunchSignature() const;
  int64_t workspace_bytes() const;

 private:
  struct Bucket {
    int32_t rows = 0;
    decode::PlanSizes caps;
    DeviceBuffer workspace;
    // The pinned plan image, two copies used alternately: the previous step's upload may still be
    // queued behind the running step when the next step is planned (step pipelining).
    PinnedBuffer images[2];
  };
  DecodeAttention() = default;

  KvShape shape_;         // the pages' shape (kv_elem_bytes 1 for FP8)
  KvShape policy_shape_;  // shape_ with 16-bit pages: what the route policy was fitted on
  decode::DType dtype_ = decode::DType::kBFloat16;
  KvCacheDtype kv_dtype_ = KvCacheDtype::kAuto;
  // Kernel configurations a step may run (decode::CandidateKernelConfigs less those this GPU
  // cannot fit; [0] is the default, the one the route policy was calibrated with) and the
  // planner's limits under each.
  decode::KernelConfig configs_[2];
  decode::DeviceLimits config_limits_[2];
  int32_t num_configs_ = 0;             // set by Create
  int32_t chosen_ = 0;                  // the prepared step's configuration (ChooseKernelConfig)
  decode::DeviceLimits policy_limits_;  // of the default config's kernels: the policy's
  std::vector<Bucket> buckets_;
  int next_image_ = 0;  // the image copy the next Prepare fills
  const Bucket* current_ = nullptr;
  decode::WorkspaceLayout layout_;  // the prepared plan's layout (filling mode)
  decode::DecodePlan plan_;
  std::unique_ptr<policy::RoutePolicy> policy_;
  policy::RouteChoice choice_;
  bool workqueue_balanced_ = decode::PlanOptions{}.workqueue_balanced;
  bool few_row_w8_ = false;    // set by Create
  int64_t steps_ = 0;          // Prepare calls
  int64_t route_changes_ = 0;  // for the route-change log lines
};

}  // namespace pkv::cuda_backend
