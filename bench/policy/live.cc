#include "bench/policy/live.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "bench/kernels/gpu_util.h"
#include "bench/kernels/kernels_bench.h"
#include "bench/kernels/report.h"
#include "bench/kernels/sm_partition.h"
#include "bench/kernels/trace.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/decode/decode_launch.h"
#include "kernels/policy/features.h"
#include "kernels/policy/route_policy.h"

namespace pkv::bench {

absl::StatusOr<LiveResult> MeasureLive(const LiveOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::vector<TraceLine> all, ReadTrace(options.trace));
  std::vector<TraceLine> lines;
  for (TraceLine& l : all) {
    bool keep = options.lines.empty();
    for (size_t p = 0, q; !keep && p <= options.lines.size(); p = q + 1) {
      q = options.lines.find(',', p);
      if (q == std::string::npos) q = options.lines.size();
      const std::string part = options.lines.substr(p, q - p);
      keep = !part.empty() && l.name.find(part) != std::string::npos;
    }
    if (keep) lines.push_back(std::move(l));
  }
  if (lines.empty()) return absl::InvalidArgumentError("--live: no trace line selected");
  cudaDeviceProp prop;
  PKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<SmPartition> part, SmPartition::Create(options.sm_count));
  BenchConfig cfg;
  cfg.shape = options.shape;
  cfg.iters = options.iters;
  cfg.wall_iters = 3;
  cfg.graph = false;
  cfg.sm_count = part->sm_count();
  cfg.sm_mode = part->mode();
  cfg.cap_grid = part->mode() == "capped";
  for (decode::Route r : policy::kCandidateRoutes) {
    RouteVariant v;
    v.route = r;
    v.label = "w4s3";
    cfg.variants.push_back(v);
  }
  PKV_ASSIGN_OR_RETURN(cfg.stream_gbps,
                       MeasureStreamReadGBps(int64_t{1} << 30, 10, part->stream()));
  std::printf("# live: %s, %d SMs (mode %s), streaming read %.1f GB/s\n", prop.name,
              part->sm_count(), part->mode().c_str(), cfg.stream_gbps);
  PKV_RETURN_IF_ERROR(decode::ConfigureDecodeKernels(cfg.variants[0].config));
  PKV_ASSIGN_OR_RETURN(decode::DeviceLimits limits,
                       decode::QueryDeviceLimits(0, cfg.shape, cfg.dtype, cfg.variants[0].config));
  limits.num_sms = part->sm_count();  // what the planner is told, as pkv-bench kernels does
  KernelsBench bench(cfg, part->stream());
  PKV_RETURN_IF_ERROR(bench.Prepare(lines));
  std::FILE* tsv = options.out_tsv.empty() ? nullptr : std::fopen(options.out_tsv.c_str(), "w");
  if (!options.out_tsv.empty() && tsv == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot write ", options.out_tsv));
  }
  if (tsv != nullptr) WriteTsvHeader(tsv);
  RunInfo info{part->sm_count(), part->mode(), cfg.stream_gbps, {}};
  LiveResult result;
  result.gpu_name = prop.name;
  result.sm_count = part->sm_count();
  result.ctas_per_sm = limits.ctas_per_sm;
  for (const TraceLine& line : lines) {
    absl::StatusOr<std::vector<RowResult>> rows = bench.RunLine(line);
    if (!rows.ok()) {
      if (tsv != nullptr) std::fclose(tsv);
      return rows.status();
    }
    policy::CellTimes cell;
    cell.cell = line.name;
    cell.sm_count = part->sm_count();
    for (const RowResult& r : *rows) {
      PKV_ASSIGN_OR_RETURN(decode::Route route, decode::ParseRoute(r.route));
      cell.gpu_us[static_cast<int>(route)] = r.gpu_us;
      if (tsv != nullptr) WriteTsvRow(tsv, r, info);
    }
    // From the lengths (not the plan's PlanFeatures) so the length shape is there too.
    cell.features = policy::SummarizeBatch(
        line.lengths.data(), static_cast<int32_t>(line.lengths.size()), cfg.shape, limits);
    result.cells.push_back(std::move(cell));
  }
  if (tsv != nullptr) std::fclose(tsv);
  return result;
}

}  // namespace pkv::bench
