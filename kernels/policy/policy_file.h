// Policy files: the route policies fitted for one GPU model at one SM count, as `pkv-bench
// calibrate` (or the worker's on-start calibration) writes them and the worker loads them
// (--policy_file; the Helm chart mounts worker.policy.json at /etc/pkv/policy/policy.json).
// Committed files live in policies/, named by PolicyFileName (e.g. nvidia-h200-132sm.json).
//
// Format, version 1 (JSON object; unknown members are ignored):
//   "format": "pkv-decode-policy", "version": 1,
//   "kind": "learned" | "threshold"        the policy the worker runs (learned is the default)
//   "gpu": {"name": "NVIDIA H200", "num_sms": 132, "ctas_per_sm": 2}
//   "shape": {"num_q_heads": 32, "num_kv_heads": 8, "head_dim": 128, "page_size": 16}
//   "split": {"min_split_tokens": 128, "workqueue_chunk_tokens": 0}     planner split parameters
//   "source": "...", "cells": 42                                         informational
//   "threshold": {"batch_edges": [4, 64], "long_context_tokens": 12000,
//                 "short_routes": [...], "long_routes": [...]}          threshold_policy.h
//   "learned": {"ridge": 0.03,
//               "routes": {"fused": {"one": 3.2, "log_bytes_per_slot": 0.9, ...}, "split": {...},
//                          "workqueue": {...}, "persistent": {...}},    per route: input -> w
//               "loo_gm_regret": 1.004, "loo_worst_regret": 1.06}       cost_model.h
// The section named by "kind" must be present; the other is optional.
// Version 2 (policy v2) adds to "learned": "default_route": "workqueue", "margin": 0.02
// (CostModel::default_route / margin). A file is written as version 1 when its margin is 0, so
// builds that read only version 1 keep loading it, and as version 2 otherwise, which such builds
// refuse by version instead of silently dropping the margin. "input_range" lists the inputs a
// route uses (clamping others changes nothing); a build that does not know an input refuses the
// file by its name.
// Thread-safety: pure functions (WritePolicyFile writes a temporary file and renames it).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/route_policy.h"
#include "kernels/policy/threshold_policy.h"

namespace pkv::policy {

inline constexpr int kPolicyFileVersion = 2;  // the newest version this build reads and writes

struct PolicyFile {
  std::string kind = "learned";
  std::string gpu_name;
  int32_t num_sms = 0;
  int32_t ctas_per_sm = 0;
  KvShape shape{32, 8, 128, 16};
  SplitParams split;
  std::string source;
  int32_t cells = 0;
  bool has_threshold = false;
  ThresholdRules threshold;
  bool has_learned = false;
  CostModel learned;
  CostFitReport learned_report;
};

std::string PolicyFileToJson(const PolicyFile& file);
// INVALID_ARGUMENT naming the member for malformed JSON, a wrong format tag or version, a
// missing or mistyped member, an unknown route or input name, or a kind without its section.
absl::StatusOr<PolicyFile> ParsePolicyFile(std::string_view json);
// NOT_FOUND when the file does not exist; otherwise as ParsePolicyFile (message prefixed by path).
absl::StatusOr<PolicyFile> ReadPolicyFile(const std::string& path);
absl::Status WritePolicyFile(const std::string& path, const PolicyFile& file);

// The policy of `kind` ("learned", "threshold"; empty: the file's own kind).
absl::StatusOr<std::unique_ptr<RoutePolicy>> MakePolicy(const PolicyFile& file,
                                                        std::string_view kind = {});

// "<device name, lowercased, runs of other characters as '-'>-<num_sms>sm.json", e.g.
// PolicyFileName("NVIDIA H200", 132) == "nvidia-h200-132sm.json"; a policy of FP8 pages
// (kv_elem_bytes 1, its features counting FP8 bytes) is "nvidia-h200-132sm-fp8.json".
std::string PolicyFileName(std::string_view device_name, int32_t num_sms,
                           int32_t kv_elem_bytes = 2);
// Where a worker caches its on-start calibration for one model shape, e.g.
// "nvidia-h200-132sm-q32-kv8-d128-p16.json": a fitted file (PolicyFileName) is never overwritten,
// and models of other shapes on the same machine keep their own caches.
std::string PolicyCacheFileName(std::string_view device_name, int32_t num_sms,
                                const KvShape& shape);

}  // namespace pkv::policy
