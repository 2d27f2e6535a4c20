// pkv-bench kernels: replays each line of a trace grid through the decode routes and reports GPU
// time (CUDA events, L2 flushed), wall time (planning included), KV bytes, GB/s and the fraction
// of a streaming-read bandwidth measured in the same run, launches, split occupancy, merge-state
// bytes, planner time and the plan features the route policy learns from. See bench/NOTES.md.
//
//   pkv-bench kernels --trace FILE [--flashinfer FILE] [--out FILE.tsv] [--routes a,b:2k,...]
//       [--configs w4s3,w8s2] [--steps 8] [--iters 100] [--sm_count N] [--hq 32 --hkv 8 --d 128
//       --dtype fp16 --page 16] [--kv_dtype auto,fp8_e4m3]
// A route followed by ":2k" uses the separate merge launch instead of the in-kernel merge.
#include <cstdio>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bench/kernels/gpu_util.h"
#include "bench/kernels/kernels_bench.h"
#include "bench/kernels/report.h"
#include "bench/kernels/sm_partition.h"
#include "bench/kernels/trace.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, flashinfer, "",
          "kernels: FlashInfer's best time per trace line (TSV), printed beside ours");
ABSL_FLAG(std::string, routes, "fused,split,workqueue,bucketed-exact,persistent",
          "kernels: routes measured; a route followed by :2k uses the separate merge launch");
ABSL_FLAG(std::string, configs, "default",
          "kernels: kernel configs (warps, stages), e.g. w4s3,w8s2; default: the worker's default "
          "for each KV dtype (decode::DefaultKernelConfig); auto: decode::ChooseKernelConfig's "
          "per-step choice (the worker's, with 16-bit w8s3 for 1-2 row steps: "
          "CudaBackendOptions::decode_few_row_w8)");
ABSL_FLAG(int32_t, wall_iters, 20, "kernels: wall-clock iterations (planning included)");
ABSL_FLAG(int32_t, min_split, 128, "kernels: the planner's min_split_tokens");
ABSL_FLAG(bool, workqueue_balanced, pkv::decode::PlanOptions{}.workqueue_balanced,
          "kernels: the workqueue's balanced layout (PlanOptions::workqueue_balanced)");
ABSL_FLAG(bool, workqueue_quota_chunks, pkv::decode::PlanOptions{}.workqueue_quota_chunks,
          "kernels: the balanced workqueue also tries quota chunks "
          "(PlanOptions::workqueue_quota_chunks)");
ABSL_FLAG(int32_t, flush_mb, 256, "kernels: MiB touched between iterations to flush L2");
ABSL_FLAG(std::string, flush, "read", "kernels: how L2 is flushed: read | write");
ABSL_FLAG(bool, graph, true, "kernels: time the steps as one CUDA graph");
ABSL_FLAG(bool, page_prefix, true,
          "kernels: plans carry each item's first page ids (one round trip less per item)");
ABSL_FLAG(int32_t, bw_mb, 4096, "kernels: MiB read by the streaming-bandwidth measurement");
ABSL_FLAG(bool, floor, true, "kernels: measure the empty-launch floor first");
ABSL_FLAG(bool, plan_only, false,
          "kernels: print the planner's counters for every line and variant (no GPU work)");
ABSL_FLAG(bool, paper_counters, false,
          "kernels --plan_only: also plan the workqueue at the split route's chunk size");

namespace pkv::bench {
namespace {

// The variants of one KV dtype: every (config, route) pair.
absl::StatusOr<std::vector<RouteVariant>> ParseVariants(const std::string& routes,
                                                        const std::string& configs,
                                                        KvCacheDtype kv) {
  std::vector<RouteVariant> out;
  for (absl::string_view cfg : absl::StrSplit(configs, ',', absl::SkipEmpty())) {
    decode::KernelConfig kc = decode::DefaultKernelConfig(kv);
    const bool auto_config = cfg == "auto";
    const int n = cfg == "default" || auto_config
                      ? 2
                      : std::sscanf(std::string(cfg).c_str(), "w%ds%dp%d", &kc.warps, &kc.stages,
                                    &kc.l2_prefetch);
    if (n < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --configs entry '", cfg,
                       "'; expected default, auto or w<warps>s<stages>[p<prefetch>], e.g. w4s3"));
    }
    const std::string cfg_label =
        auto_config          ? std::string("auto")
        : kc.l2_prefetch > 0 ? absl::StrCat("w", kc.warps, "s", kc.stages, "p", kc.l2_prefetch)
                             : absl::StrCat("w", kc.warps, "s", kc.stages);
    for (absl::string_view r : absl::StrSplit(routes, ',', absl::SkipEmpty())) {
      RouteVariant v;
      std::vector<absl::string_view> parts = absl::StrSplit(r, ':');
      PKV_ASSIGN_OR_RETURN(v.route, decode::ParseRoute(parts[0]));
      v.merge = parts.size() > 1 && parts[1] == "2k" ? decode::MergeMode::kSeparate
                                                     : decode::MergeMode::kInKernel;
      v.config = kc;
      v.auto_config = auto_config;
      v.kv_dtype = kv;
      v.label = absl::StrCat(cfg_label, v.merge == decode::MergeMode::kSeparate ? "/2k" : "",
                             IsFp8(kv) ? "/" : "", IsFp8(kv) ? KvCacheDtypeName(kv) : "");
      out.push_back(v);
    }
  }
  return out;
}

// Every KV dtype of the comma-separated list, each with every (config, route) pair.
absl::StatusOr<std::vector<RouteVariant>> ParseVariants(const std::string& routes,
                                                        const std::string& configs,
                                                        const std::string& kv_dtypes) {
  std::vector<RouteVariant> out;
  for (absl::string_view kv_name : absl::StrSplit(kv_dtypes, ',', absl::SkipEmpty())) {
    PKV_ASSIGN_OR_RETURN(const KvCacheDtype kv, ParseKvCacheDtype(std::string(kv_name)));
    PKV_ASSIGN_OR_RETURN(std::vector<RouteVariant> vs, ParseVariants(routes, configs, kv));
    out.insert(out.end(), vs.begin(), vs.end());
  }
  if (out.empty()) return absl::InvalidArgumentError("no route variants");
  return out;
}

bool Selected(const std::string& name, const std::string& filter) {
  if (filter.empty()) return true;
  for (absl::string_view f : absl::StrSplit(filter, ',', absl::SkipEmpty())) {
    if (name.find(std::string(f)) != std::string::npos) return true;
  }
  return false;
}

// --plan_only: planner counters for every line and variant, no GPU needed (the device limits come
// from --sm_count and --ctas_per_sm). With --paper_counters the workqueue is also planned at the
// split route's chunk size, the comparison the paper's merge-traffic claim makes. Plans are
// graph-sized as the worker's (one bucket of the line's rows); plan_us is the mean of
// kPlanRepeats calls after a warm-up call (a single cold call also times the vectors' growth).
absl::Status PlanOnly(const std::vector<TraceLine>& lines, const BenchConfig& cfg, int sm_count) {
  decode::DeviceLimits limits{sm_count > 0 ? sm_count : 132, absl::GetFlag(FLAGS_ctas_per_sm)};
  std::printf(
      "trace\troute\tvariant\tlaunches\titems\titems_nonempty\toccupancy\t"
      "merge_bytes\tnum_merges\tplan_us\n");
  decode::DecodePlan plan, split;
  for (const TraceLine& line : lines) {
    std::vector<int32_t> indptr(1, 0);
    for (int32_t len : line.lengths) {
      indptr.push_back(indptr.back() + (len + cfg.shape.page_size - 1) / cfg.shape.page_size);
    }
    decode::PlanInput in{line.lengths.data(), indptr.data(),
                         static_cast<int32_t>(line.lengths.size()), cfg.shape};
    for (const RouteVariant& v : cfg.variants) {
      in.shape.kv_elem_bytes = IsFp8(v.kv_dtype) ? 1 : 2;
      decode::PlanOptions opt;
      opt.route = v.route;
      opt.merge = v.merge;
      opt.min_split_tokens = cfg.min_split_tokens;
      opt.workqueue_balanced = cfg.workqueue_balanced;
      opt.workqueue_quota_chunks = cfg.workqueue_quota_chunks;
      std::string label = v.label;
      if (absl::GetFlag(FLAGS_paper_counters) && v.route == decode::Route::kWorkqueue) {
        decode::PlanOptions sopt = opt;
        sopt.route = decode::Route::kSplit;
        PKV_RETURN_IF_ERROR(decode::PlanDecode(in, limits, sopt, &split));
        int32_t chunk = 0;  // the split route's chunk: its first split's length
        for (const auto& it : split.items) chunk = std::max(chunk, it.token_end - it.token_begin);
        opt.workqueue_chunk_tokens = chunk;
        label += "@split-chunk";
      }
      opt.capacity_rows = std::max<int32_t>(1, in.num_rows);
      constexpr int kPlanRepeats = 200;
      PKV_RETURN_IF_ERROR(decode::PlanDecode(in, limits, opt, &plan));
      double plan_us = 0.0;
      for (int i = 0; i < kPlanRepeats; ++i) {
        PKV_RETURN_IF_ERROR(decode::PlanDecode(in, limits, opt, &plan));
        plan_us += plan.counters.plan_us / kPlanRepeats;
      }
      const auto& c = plan.counters;
      std::printf("%s\t%s\t%s\t%d\t%d\t%d\t%.4f\t%lld\t%d\t%.2f\n", line.name.c_str(),
                  std::string(decode::RouteName(v.route)).c_str(), label.c_str(), c.launches,
                  c.items, c.items_nonempty, c.occupancy(),
                  static_cast<long long>(c.merge_state_bytes), c.num_merges, plan_us);
    }
  }
  return absl::OkStatus();
}

// The measurement settings of the flags (defaults: the flags').
absl::StatusOr<BenchConfig> ConfigFromFlags() {
  BenchConfig cfg;
  cfg.shape = KvShapeFromFlags();
  PKV_RETURN_IF_ERROR(decode::ValidateShape(cfg.shape));
  const std::string dtype =
      absl::GetFlag(FLAGS_dtype).empty() ? "fp16" : absl::GetFlag(FLAGS_dtype);
  if (dtype != "fp16" && dtype != "bf16") {
    return absl::InvalidArgumentError("--dtype: supported fp16, bf16");
  }
  cfg.dtype = dtype == "bf16" ? decode::DType::kBFloat16 : decode::DType::kFloat16;
  cfg.steps = std::max(1, absl::GetFlag(FLAGS_steps).value_or(8));
  cfg.iters = std::max(1, absl::GetFlag(FLAGS_iters).value_or(100));
  cfg.wall_iters = std::max(1, absl::GetFlag(FLAGS_wall_iters));
  cfg.min_split_tokens = absl::GetFlag(FLAGS_min_split);
  cfg.workqueue_balanced = absl::GetFlag(FLAGS_workqueue_balanced);
  cfg.workqueue_quota_chunks = absl::GetFlag(FLAGS_workqueue_quota_chunks);
  cfg.flush_bytes = int64_t{absl::GetFlag(FLAGS_flush_mb)} << 20;
  const std::string flush = absl::GetFlag(FLAGS_flush);
  if (flush != "read" && flush != "write") {
    return absl::InvalidArgumentError("--flush: supported read, write");
  }
  cfg.flush_write = flush == "write";
  cfg.graph = absl::GetFlag(FLAGS_graph);
  cfg.page_prefix = absl::GetFlag(FLAGS_page_prefix);
  PKV_ASSIGN_OR_RETURN(cfg.variants,
                       ParseVariants(absl::GetFlag(FLAGS_routes), absl::GetFlag(FLAGS_configs),
                                     absl::GetFlag(FLAGS_kv_dtype)));
  return cfg;
}

absl::Status Run() {
  PKV_ASSIGN_OR_RETURN(BenchConfig cfg, ConfigFromFlags());
  PKV_ASSIGN_OR_RETURN(std::vector<TraceLine> all, ReadTrace(absl::GetFlag(FLAGS_trace)));
  std::vector<TraceLine> lines;
  for (auto& l : all) {
    if (Selected(l.name, absl::GetFlag(FLAGS_lines))) lines.push_back(std::move(l));
  }
  const int sm_count = absl::GetFlag(FLAGS_sm_count);
  if (absl::GetFlag(FLAGS_plan_only)) return PlanOnly(lines, cfg, sm_count);
  RunInfo info;
  if (const std::string fi = absl::GetFlag(FLAGS_flashinfer); !fi.empty()) {
    PKV_ASSIGN_OR_RETURN(info.flashinfer_us, ReadFlashInferBest(fi));
  }
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<SmPartition> part, SmPartition::Create(sm_count));
  cfg.sm_count = part->sm_count();
  cfg.sm_mode = part->mode();
  cfg.cap_grid = part->mode() == "capped";
  std::printf("# device SMs used: %d (mode %s%s%s)\n", part->sm_count(), part->mode().c_str(),
              part->note().empty() ? "" : ", green context failed: ", part->note().c_str());
  const int bw_mb = absl::GetFlag(FLAGS_bw_mb);
  PKV_ASSIGN_OR_RETURN(cfg.stream_gbps,
                       MeasureStreamReadGBps(int64_t{bw_mb} << 20, 20, part->stream()));
  std::printf("# streaming-read bandwidth: %.1f GB/s over %d MiB; L2 flush: %s %d MiB\n",
              cfg.stream_gbps, bw_mb, cfg.flush_write ? "write" : "read",
              absl::GetFlag(FLAGS_flush_mb));
  if (absl::GetFlag(FLAGS_floor)) {
    PKV_ASSIGN_OR_RETURN(LaunchFloor fl, MeasureLaunchFloor(200, part->stream()));
    std::printf(
        "# empty-launch floor (events): 1 kernel %.2f us, 2 dependent %.2f us; "
        "CUDA graph: 1 kernel %.2f us, 2 kernels %.2f us\n",
        fl.one_us, fl.two_us, fl.one_graph_us, fl.two_graph_us);
  }
  info.sm_count = cfg.sm_count;
  info.sm_mode = cfg.sm_mode;
  info.stream_gbps = cfg.stream_gbps;
  KernelsBench bench(cfg, part->stream());
  PKV_RETURN_IF_ERROR(bench.Prepare(lines));
  std::FILE* tsv = nullptr;
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty()) {
    tsv = std::fopen(out.c_str(), "w");
    if (tsv == nullptr) return absl::NotFoundError("cannot write " + out);
    WriteTsvHeader(tsv);
  }
  PrintTableHeader(stdout);
  for (const TraceLine& line : lines) {
    absl::StatusOr<std::vector<RowResult>> rows = bench.RunLine(line);
    if (!rows.ok()) {
      if (tsv != nullptr) std::fclose(tsv);
      return absl::Status(rows.status().code(),
                          absl::StrCat(line.name, ": ", rows.status().message()));
    }
    for (const RowResult& r : *rows) {
      PrintTableRow(stdout, r, info);
      if (tsv != nullptr) WriteTsvRow(tsv, r, info);
    }
    std::fflush(stdout);
    if (tsv != nullptr) std::fflush(tsv);
  }
  if (tsv != nullptr) std::fclose(tsv);
  return absl::OkStatus();
}

}  // namespace

int KernelsMain() { return RunSubcommand("kernels", Run); }

}  // namespace pkv::bench
