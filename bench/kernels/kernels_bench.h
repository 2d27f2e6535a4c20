// The measurement loop of `pkv-bench kernels`: replays trace lines through route variants and
// returns one result row per (line, variant). GPU time: CUDA events around LaunchDecode with the
// L2 flushed before each iteration (plan upload before the flush, outside the events); wall
// time: host planning + image fill + upload + launch + stream synchronisation.
// Not thread-safe; owns its device buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/kernels/gpu_util.h"
#include "bench/kernels/trace.h"
#include "kernels/decode/decode_launch.h"
#include "kernels/decode/plan.h"

namespace pkv::bench {

struct RouteVariant {
  decode::Route route = decode::Route::kWorkqueue;
  decode::MergeMode merge = decode::MergeMode::kInKernel;
  decode::KernelConfig config;
  bool auto_config = false;  // config chosen per line by decode::ChooseKernelConfig
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // FP8: 1-byte pages with their own pool
  std::string label;                            // e.g. "w4s3", "w4s3/2k" or "w4s3/fp8_e4m3"
};

struct BenchConfig {
  KvShape shape{32, 8, 128, 16};
  decode::DType dtype = decode::DType::kFloat16;
  int steps = 8;
  int iters = 100;
  int wall_iters = 20;
  int min_split_tokens = 128;
  bool workqueue_balanced = decode::PlanOptions{}.workqueue_balanced;  // the planner's layout rule
  bool workqueue_quota_chunks = decode::PlanOptions{}.workqueue_quota_chunks;
  int64_t flush_bytes = int64_t{256} << 20;
  bool flush_write = false;  // L2 flush by writing instead of reading (see L2Flusher)
  bool graph = true;         // also time CUDA-graph replays of graph-sized plans
  bool page_prefix = true;   // plans carry each item's first page ids (PlanInput::page_ids)
  std::vector<RouteVariant> variants;
  int sm_count = 0;       // SMs the planner is told about
  bool cap_grid = false;  // fallback SM restriction: cap grids to sm_count * ctas_per_sm
  std::string sm_mode = "all";
  double stream_gbps = 0.0;  // streaming-read bandwidth measured in the same run and context
};

struct RowResult {
  std::string trace, kind;
  int batch = 0;
  int64_t sum_len = 0;
  int max_len = 0;
  std::string route, variant;
  double gpu_us = 0, gpu_us_p10 = 0, gpu_us_p90 = 0, wall_us = 0;
  double graph_us = 0;  // median GPU time of a CUDA-graph replay (graph-sized plan); 0: not run
  double kv_bytes = 0, gbps = 0, frac_bw = 0;
  decode::PlanCounters counters;  // of step 0 (plan_us: median over the wall iterations)
  decode::PlanFeatures features;
  double max_diff_vs_fused = -1;  // -1: not compared
};

class KernelsBench {
 public:
  KernelsBench(BenchConfig config, cudaStream_t stream);
  ~KernelsBench();
  KernelsBench(const KernelsBench&) = delete;
  KernelsBench& operator=(const KernelsBench&) = delete;

  // Sizes and fills the KV pool, page table, Q, outputs and workspace for the largest line.
  absl::Status Prepare(const std::vector<TraceLine>& lines);
  absl::StatusOr<std::vector<RowResult>> RunLine(const TraceLine& line);

 private:
  struct Buffers;
  absl::Status RunVariant(const TraceLine& line, const RouteVariant& v, RowResult* row);
  absl::StatusOr<decode::DeviceLimits> LimitsFor(const RouteVariant& v);
  KvShape ShapeFor(const RouteVariant& v) const;
  absl::Status PlanStep(const RouteVariant& v, const decode::DeviceLimits& limits, int step,
                        bool graph_sized, decode::DecodePlan* plan);
  absl::Status TimeGraph(const RouteVariant& v, const decode::DeviceLimits& limits, float scale,
                         RowResult* row);
  absl::Status CheckAgainstFused(const RouteVariant& v, RowResult* row);
  decode::DecodeTensors Tensors(const RouteVariant& v) const;

  BenchConfig cfg_;
  cudaStream_t stream_;
  std::unique_ptr<Buffers> buf_;
  std::vector<int32_t> lengths_;       // current line, step 0
  std::vector<int32_t> step_lengths_;  // scratch
  std::vector<int32_t> page_indptr_;
  // Step-0 output of the fused route per KV dtype, for max_diff (FP8 against FP8).
  std::map<KvCacheDtype, std::vector<uint16_t>> fused_out_;
};

}  // namespace pkv::bench
