// pkv-bench policy: evaluates the route policies on a grid, cell by cell: every route's GPU time,
// the route each policy chooses, its regret (chosen / best) and speed-up against fused, and per
// policy the worst and geometric-mean regret and geometric-mean speed-up against fused.
//
//   pkv-bench policy --measurements sweep_heldout.tsv [--sm_count N]      (offline: recorded times)
//   pkv-bench policy --live --trace heldout-20260623.tsv [--sm_count N] (GPU: plan + time now)
//       [--traces GRID.tsv,..] (offline: the trace grids replayed, for length-shape inputs)
//       [--policy_dir policies | --policy_file FILE] [--gpu_name "NVIDIA H200"] [--out FILE.md]
//
// Policies shown: learned and threshold (from the policy file of the GPU and SM partition),
// the paper's hand-set rules unfitted, always-workqueue and always-persistent, and the best route
// per cell (oracle). Offline, every SM partition in the file is evaluated, each with its own
// policy file, followed by a table of how the choices move with the SM count.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_flags.h"
#include "bench/policy/evaluate.h"
#include "bench/policy/measurements_tsv.h"
#include "bench/policy/policy_report.h"
#include "bench/policy/trace_join.h"
#include "common/status_macros.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/policy_file.h"
#include "kernels/policy/threshold_policy.h"
#if PKV_HAVE_CUDA
#include "bench/policy/live.h"
#endif

ABSL_FLAG(bool, live, false,
          "policy: plan and time the routes on this GPU now over --trace (CUDA build) instead of "
          "reading --measurements");
ABSL_FLAG(std::string, out_tsv, "",
          "policy --live: also write the measurements as a pkv-bench kernels TSV (re-evaluable "
          "offline)");
ABSL_FLAG(std::string, policy_dir, "policies",
          "policy: directory of the policy files, <gpu>-<sms>sm.json");
ABSL_FLAG(std::string, policy_file, "", "policy: one policy file instead of --policy_dir's");
ABSL_FLAG(bool, cells, true, "policy: print the per-cell table");
ABSL_FLAG(bool, cost, true, "policy: time SummarizeBatch and Choose() on this host");

namespace pkv::bench {
namespace {

using policy::CellTimes;

// The best candidate route of each cell: the regret-1 reference.
PolicyRun OracleRun(const std::vector<CellTimes>& cells) {
  PolicyRun run;
  run.name = "best-route";
  for (const CellTimes& c : cells) {
    policy::CellOutcome o;
    o.cell = c.cell;
    o.sm_count = c.sm_count;
    o.chosen = o.best = c.best();
    o.chosen_us = o.best_us = c.best_us();
    o.fused_us = c.time(decode::Route::kFused);
    run.outcomes.push_back(std::move(o));
  }
  return run;
}

absl::StatusOr<PolicyRun> Run(const std::string& name, const policy::RoutePolicy& p,
                              const std::vector<CellTimes>& cells) {
  PolicyRun run;
  run.name = name;
  PKV_ASSIGN_OR_RETURN(run.outcomes, policy::EvaluatePolicy(p, cells));
  return run;
}

absl::StatusOr<std::vector<PolicyRun>> RunAll(const policy::PolicyFile& file,
                                              const std::vector<CellTimes>& cells) {
  std::vector<PolicyRun> runs;
  if (file.has_learned && policy::UsesLengthShape(file.learned)) {
    for (const CellTimes& c : cells) {
      if (!c.features.has_length_shape()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the learned policy uses a length-shape input and cell ", c.cell,
                         " has none: pass the sweep's trace grid with --traces"));
      }
    }
  }
  for (const char* kind : {"learned", "threshold"}) {
    if ((kind == std::string("learned") && !file.has_learned) ||
        (kind == std::string("threshold") && !file.has_threshold)) {
      continue;
    }
    PKV_ASSIGN_OR_RETURN(auto p, policy::MakePolicy(file, kind));
    PKV_ASSIGN_OR_RETURN(PolicyRun r, Run(kind, *p, cells));
    runs.push_back(std::move(r));
  }
  PKV_ASSIGN_OR_RETURN(policy::ThresholdPolicy paper,
                       policy::ThresholdPolicy::Create(policy::PaperRules()));
  PKV_ASSIGN_OR_RETURN(PolicyRun pr, Run("paper-rules", paper, cells));
  runs.push_back(std::move(pr));
  for (decode::Route r : {decode::Route::kWorkqueue, decode::Route::kPersistent}) {
    PKV_ASSIGN_OR_RETURN(PolicyRun fr, Run(absl::StrCat("always-", decode::RouteName(r)),
                                           policy::FixedPolicy(r), cells));
    runs.push_back(std::move(fr));
  }
  runs.push_back(OracleRun(cells));
  return runs;
}

absl::StatusOr<policy::PolicyFile> LoadPolicy(const std::string& gpu_name, int sm) {
  policy::ReadOptions kv;  // the file of --kv_dtype's pages
  PKV_RETURN_IF_ERROR(policy::SelectKvDtype(absl::GetFlag(FLAGS_kv_dtype), &kv));
  const std::string path =
      !absl::GetFlag(FLAGS_policy_file).empty()
          ? absl::GetFlag(FLAGS_policy_file)
          : absl::StrCat(absl::GetFlag(FLAGS_policy_dir), "/",
                         policy::PolicyFileName(gpu_name, sm, kv.shape.kv_elem_bytes));
  PKV_ASSIGN_OR_RETURN(policy::PolicyFile file, policy::ReadPolicyFile(path));
  if (file.num_sms != sm) {
    std::fprintf(stderr, "# warning: %s was calibrated for %d SMs, evaluating at %d\n",
                 path.c_str(), file.num_sms, sm);
  }
  return file;
}

absl::StatusOr<std::vector<CellTimes>> LoadCells(std::string* gpu_name) {
  if (absl::GetFlag(FLAGS_live)) {
#if PKV_HAVE_CUDA
    LiveOptions lo;
    lo.trace = absl::GetFlag(FLAGS_trace);
    lo.lines = absl::GetFlag(FLAGS_lines);
    lo.sm_count = absl::GetFlag(FLAGS_sm_count);
    lo.iters = absl::GetFlag(FLAGS_iters).value_or(lo.iters);
    lo.shape = KvShapeFromFlags();
    lo.out_tsv = absl::GetFlag(FLAGS_out_tsv);
    PKV_ASSIGN_OR_RETURN(LiveResult live, MeasureLive(lo));
    *gpu_name = live.gpu_name;
    return live.cells;
#else
    return absl::UnimplementedError("--live needs a CUDA build");
#endif
  }
  const std::string measurements = absl::GetFlag(FLAGS_measurements);
  if (measurements.empty()) {
    return absl::InvalidArgumentError("--measurements FILE or --live --trace FILE is required");
  }
  policy::ReadOptions ro;
  ro.shape = KvShapeFromFlags();
  ro.ctas_per_sm = absl::GetFlag(FLAGS_ctas_per_sm);
  ro.sm_count = absl::GetFlag(FLAGS_sm_count);
  PKV_RETURN_IF_ERROR(policy::SelectKvDtype(absl::GetFlag(FLAGS_kv_dtype), &ro));
  *gpu_name = absl::GetFlag(FLAGS_gpu_name);
  PKV_ASSIGN_OR_RETURN(std::vector<CellTimes> cells, policy::ReadMeasurements(measurements, ro));
  if (const std::string files = absl::GetFlag(FLAGS_traces); !files.empty()) {
    PKV_ASSIGN_OR_RETURN(const policy::TraceLengths traces, policy::ReadTraceFiles(files));
    PKV_RETURN_IF_ERROR(policy::AttachLengthShape(traces, ro, &cells));
  }
  return cells;
}

// Host cost of choosing: SummarizeBatch over a 256-row batch and Choose() of each policy, timed
// over many calls (reported, never asserted: tests/unit/policy checks determinism and that
// Choose() allocates nothing).
void PrintChooseCost(std::FILE* out, const policy::PolicyFile& file) {
  using Clock = std::chrono::steady_clock;
  std::vector<int32_t> lengths(256);
  std::mt19937 rng(1);
  for (int32_t& l : lengths) l = std::uniform_int_distribution<int>(128, 32768)(rng);
  const decode::DeviceLimits limits{file.num_sms, file.ctas_per_sm};
  constexpr int kCalls = 200000;
  volatile int64_t sink = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < kCalls; ++i) {
    lengths[i & 255] ^= 1;
    sink = sink + policy::SummarizeBatch(lengths.data(), 256, file.shape, limits).total_kv_bytes;
  }
  const double summarize_ns =
      std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kCalls;
  const policy::BatchFeatures f = policy::SummarizeBatch(lengths.data(), 256, file.shape, limits);
  std::fprintf(out, "Host cost on this machine: SummarizeBatch(256 rows) %.0f ns", summarize_ns);
  for (const char* kind : {"learned", "threshold"}) {
    absl::StatusOr<std::unique_ptr<policy::RoutePolicy>> p = policy::MakePolicy(file, kind);
    if (!p.ok()) continue;
    t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      policy::BatchFeatures g = f;
      g.batch = 1 + (i & 255);
      sink = sink + static_cast<int>((*p)->Choose(g).route);
    }
    std::fprintf(out, ", %s Choose() %.0f ns", kind,
                 std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kCalls);
  }
  std::fprintf(out, " (mean of %d calls)\n\n", kCalls);
}

absl::Status RunPolicy() {
  std::string gpu_name;
  PKV_ASSIGN_OR_RETURN(const std::vector<CellTimes> all, LoadCells(&gpu_name));
  std::FILE* out = stdout;
  const std::string out_path = absl::GetFlag(FLAGS_out);
  if (!out_path.empty()) {
    out = std::fopen(out_path.c_str(), "w");
    if (out == nullptr) return absl::NotFoundError("cannot write " + out_path);
  }
  const std::string grid =
      absl::GetFlag(FLAGS_live) ? absl::GetFlag(FLAGS_trace) : absl::GetFlag(FLAGS_measurements);
  std::fprintf(out, "# pkv-bench policy: %s (%s)\n\n", grid.c_str(), gpu_name.c_str());
  const std::vector<int32_t> sms = policy::SmCounts(all);
  std::vector<int> sm_list;
  std::vector<std::vector<PolicyRun>> runs_by_sm;
  absl::Status status;
  for (int32_t sm : sms) {
    const std::vector<CellTimes> cells = policy::CompleteCells(all, sm);
    absl::StatusOr<policy::PolicyFile> file = LoadPolicy(gpu_name, sm);
    if (!file.ok()) {
      status = file.status();
      break;
    }
    absl::StatusOr<std::vector<PolicyRun>> runs = RunAll(*file, cells);
    if (!runs.ok()) {
      status = runs.status();
      break;
    }
    std::fprintf(out, "## %d SMs: %zu cells, policy file for %s at %d SMs\n\n", sm, cells.size(),
                 file->gpu_name.c_str(), file->num_sms);
    if (absl::GetFlag(FLAGS_cells)) {
      PrintCellTable(out, cells, *runs, {0, 1});
      std::fprintf(out, "\n");
    }
    PrintSummaries(out, sm, *runs);
    std::fprintf(out, "\n");
    if (absl::GetFlag(FLAGS_cost)) PrintChooseCost(out, *file);
    sm_list.push_back(sm);
    runs_by_sm.push_back(std::move(*runs));
  }
  if (status.ok() && sm_list.size() > 1) {
    std::fprintf(out, "## How the choices move with the SM count\n\n");
    PrintSmTable(out, sm_list, runs_by_sm, "learned");
  }
  if (out != stdout) std::fclose(out);
  return status;
}

}  // namespace

int PolicyMain() { return RunSubcommand("policy", RunPolicy); }

}  // namespace pkv::bench
