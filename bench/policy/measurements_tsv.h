// Reading measured route times (kernels/policy/measurements.h) from the TSV `pkv-bench kernels`
// writes (bench/results/README.md: one row per trace line x route variant, GPU time by CUDA
// events with the L2 flushed, the planner's features in the f_* columns, the SM partition in
// sm_count), and selecting cells. Rows of variants with a separate merge launch ("/2k") are
// skipped by default: the worker runs the in-kernel merge. Bench-only (pkv-bench calibrate /
// policy and the policy unit tests); the worker never reads these files.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/policy/measurements.h"

namespace pkv::policy {

struct ReadOptions {
  // The shape and CTAs per SM the measurements were taken with (the TSV does not record them);
  // defaults: pkv-bench kernels' default shape and its w4s3 kernel (2 CTAs per SM).
  KvShape shape{32, 8, 128, 16};
  int32_t ctas_per_sm = 2;
  int32_t sm_count = 0;  // keep only rows of this SM partition; 0: all
  // Keep rows of this variant label; empty: the in-kernel-merge variant of `kv_dtype`
  // ("<config>" for 16-bit pages, "<config>/<kv dtype>" for FP8, as pkv-bench kernels labels).
  std::string variant;
  std::string kv_dtype;  // "" (16-bit pages) or a KV cache dtype name (fp8_e4m3, fp8_e5m2)
};

// Points `ro` at measurements of KV dtype `name` (auto | fp8_e4m3 | fp8_e5m2, --kv_dtype of
// calibrate and policy): the rows kept and the shape's element size. INVALID_ARGUMENT otherwise.
absl::Status SelectKvDtype(const std::string& name, ReadOptions* ro);

// Parses TSV text (header line first). INVALID_ARGUMENT naming the line for a missing column, a
// malformed number, a non-positive time, an unknown route or the same (cell, SM count, route)
// twice.
absl::StatusOr<std::vector<CellTimes>> ParseMeasurements(absl::string_view tsv,
                                                         const ReadOptions& options);
// NOT_FOUND when the file cannot be read; otherwise as ParseMeasurements.
absl::StatusOr<std::vector<CellTimes>> ReadMeasurements(const std::string& path,
                                                        const ReadOptions& options);

// The cells of one SM partition that have every candidate route.
std::vector<CellTimes> CompleteCells(const std::vector<CellTimes>& cells, int32_t sm_count);
// Distinct SM counts, descending.
std::vector<int32_t> SmCounts(const std::vector<CellTimes>& cells);

}  // namespace pkv::policy
