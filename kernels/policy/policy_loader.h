// How a worker gets its decode-route policy at start-up (issue 8):
//   1. --policy_file given: that file (a mismatch with this GPU's SM count or the model's shape is
//      logged, the file is still used: the operator asked for it); unreadable -> error.
//   2. else <policy_dir>/<PolicyFileName(device name, SM count)> if it exists and fits the model
//      (the committed policies/ files), else <policy_dir>/<PolicyCacheFileName(.., shape)> (an
//      earlier on-start calibration's cache for this shape);
//   3. else the on-start calibration (on_start_calibration.h), whose file is cached in
//      policy_dir (created if missing) under PolicyCacheFileName for the next start (a read-only
//      directory only costs the cache). The fitted file is never overwritten: before, a model of
//      another shape (a test model) calibrated over it, and every later start of the real model
//      calibrated again;
//   4. if calibration fails: the engine's default route (FixedPolicy), with a warning.
// The calibration is passed in as a function so this logic is unit-tested without a GPU.
// Thread-safety: call once at start-up; the returned policy is immutable.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/decode/plan.h"
#include "kernels/policy/policy_file.h"
#include "kernels/policy/route_policy.h"

namespace pkv::policy {

struct PolicySource {
  std::string policy_file;              // explicit file (the Helm chart's mounted ConfigMap)
  std::string policy_dir = "policies";  // per-GPU files and the calibration cache
  std::string kind;                     // learned | threshold | fixed:<route>; empty: the file's
};

struct LoadedPolicy {
  std::unique_ptr<RoutePolicy> policy;
  std::string origin;  // what was loaded, for the start-up log line
  // The page element size the policy's byte features count (its file's shape; 2 otherwise).
  int32_t kv_elem_bytes = 2;
};

using CalibrateFn = std::function<absl::StatusOr<PolicyFile>()>;

// Step 2 alone: <policy_dir>/<PolicyFileName(device name, SM count, shape.kv_elem_bytes)>, else
// the shape's cache, when it exists and fits `shape` and the CTAs per SM; nullopt otherwise (an
// unusable file is logged).
// FP8 pages look for their own file first (their features count FP8 bytes) and fall back to the
// 16-bit policy on 16-bit-equivalent features (worker/cuda_backend/decode_attention.cc).
absl::StatusOr<std::optional<LoadedPolicy>> LoadStoredPolicy(const PolicySource& source,
                                                             const std::string& gpu_name,
                                                             const decode::DeviceLimits& limits,
                                                             const KvShape& shape);

// `gpu_name` and `limits` describe the GPU as the planner sees it; `shape` is the model's KV
// shape. INVALID_ARGUMENT for a bad kind; the policy file's error when an explicit file cannot be
// used. Calibration failures fall back (step 4) instead of failing the worker.
absl::StatusOr<LoadedPolicy> LoadPolicyForGpu(const PolicySource& source,
                                              const std::string& gpu_name,
                                              const decode::DeviceLimits& limits,
                                              const KvShape& shape, const CalibrateFn& calibrate);

}  // namespace pkv::policy
