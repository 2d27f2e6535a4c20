// pkv-bench calibrate: fits the route policies (the paper's thresholds and the learned cost
// model) on kernel measurements of one GPU and writes one policy file per SM partition.
//
//   pkv-bench calibrate --measurements sweep_calibration.tsv --gpu_name "NVIDIA H200"
//       [--sm_count N (0: every partition in the file)] [--out_dir policies | --out FILE]
//       [--kind learned|threshold] [--hq 32 --hkv 8 --d 128 --page 16 --ctas_per_sm 2]
//       [--traces a.tsv,b.tsv] (the trace grids the sweep replayed: recompute each cell's
//       features from its lengths, checked against the f_* columns, for the length-shape inputs)
//       [--cv] (out-of-fold regret of the whole fit: nested leave-one-out, leave-one-kind-out)
//       fit options (bench/NOTES.md, "Policy v2 attempt"): --selection regret|per_route|
//       regret_per_route, --candidates a,b,.. --max_extra_inputs N --min_gain G --ridges l,..
//       --margins m,.. --pool (fit on every SM partition's cells, score this one)
//
// Fit on calibration measurements only (../shared/traces/README.md): the held-out and third
// grids are for `pkv-bench policy`. The shape and CTAs per SM describe how the measurements were
// taken (pkv-bench kernels' defaults) and are recorded in the file.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bench/policy/cross_validation.h"
#include "bench/policy/evaluate.h"
#include "bench/policy/measurements_tsv.h"
#include "bench/policy/trace_join.h"
#include "common/status_macros.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/policy_file.h"
#include "kernels/policy/threshold_policy.h"

ABSL_FLAG(std::string, out_dir, "policies",
          "calibrate: where the policy files go, one per SM partition (<gpu>-<sms>sm.json)");
ABSL_FLAG(std::string, kind, "learned",
          "calibrate: the policy the file selects: learned | threshold");
ABSL_FLAG(std::string, source, "",
          "calibrate: provenance recorded in the file (empty: --measurements)");
ABSL_FLAG(std::string, selection, "regret",
          "calibrate: input selection of the learned fit: regret | per_route | regret_per_route");
ABSL_FLAG(bool, drop_never_best, true, "calibrate: leave routes that are never fastest unmodelled");
ABSL_FLAG(double, min_best_lead, pkv::policy::CostFitOptions{}.min_best_lead,
          "calibrate: a route counts as fastest on a cell only when it leads the next by this "
          "factor (CostFitOptions::min_best_lead)");
ABSL_FLAG(bool, clamp, true, "calibrate: clamp the model's inputs to the calibration range");
ABSL_FLAG(bool, route_inputs, true, "calibrate: start each route from its base inputs");
ABSL_FLAG(bool, cv, false,
          "calibrate: out-of-fold regret of the whole fit (nested leave-one-out, "
          "leave-one-kind-out)");
ABSL_FLAG(std::string, candidates, "",
          "calibrate: comma-separated candidate inputs of the fit (empty: CostFitOptions')");
ABSL_FLAG(std::optional<int32_t>, max_extra_inputs, std::nullopt,
          "calibrate: inputs the selection may add per route (unset: CostFitOptions')");
ABSL_FLAG(std::string, ridges, "",
          "calibrate: comma-separated ridge grid (empty: CostFitOptions')");
ABSL_FLAG(std::optional<double>, min_gain, std::nullopt,
          "calibrate: least gain for an added input (unset: CostFitOptions')");
ABSL_FLAG(bool, pool, false, "calibrate: fit on every SM partition's cells, score this one");
ABSL_FLAG(std::string, margins, "",
          "calibrate: comma-separated margin grid (empty: CostFitOptions')");

namespace pkv::bench {
namespace {

using policy::CellTimes;
using policy::PolicyFile;

std::string DescribeRules(const policy::ThresholdRules& r) {
  std::vector<std::string> parts;
  for (size_t k = 0; k <= r.batch_edges.size(); ++k) {
    const std::string lo = k == 0 ? "1" : absl::StrCat(r.batch_edges[k - 1]);
    const std::string hi = k < r.batch_edges.size() ? absl::StrCat("<", r.batch_edges[k]) : "+";
    parts.push_back(absl::StrCat("B ", lo, hi, ": short ", decode::RouteName(r.short_routes[k]),
                                 ", long ", decode::RouteName(r.long_routes[k])));
  }
  return absl::StrCat("long context from ", r.long_context_tokens, " tokens; ",
                      absl::StrJoin(parts, "; "));
}

// The experiment knobs of the learned fit (bench/NOTES.md, "Policy v2"): candidate inputs,
// how many may be added, the ridge grid. Defaults: CostFitOptions'.
absl::Status ApplyFitFlags(policy::CostFitOptions* fit) {
  const std::string candidates = absl::GetFlag(FLAGS_candidates);
  if (!candidates.empty()) {
    fit->candidates.clear();
    for (absl::string_view name : absl::StrSplit(candidates, ',')) {
      PKV_ASSIGN_OR_RETURN(policy::Input in, policy::ParseInput(name));
      fit->candidates.push_back(in);
    }
  }
  if (const std::optional<int32_t> n = absl::GetFlag(FLAGS_max_extra_inputs)) {
    if (*n < 0) return absl::InvalidArgumentError("--max_extra_inputs must be >= 0");
    fit->max_extra_inputs = *n;
  }
  if (const std::optional<double> g = absl::GetFlag(FLAGS_min_gain)) fit->min_gain = *g;
  const std::string margins = absl::GetFlag(FLAGS_margins);
  if (!margins.empty()) {
    fit->margins.clear();
    for (absl::string_view v : absl::StrSplit(margins, ',')) {
      double margin = 0;
      if (!absl::SimpleAtod(v, &margin) || !(margin >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("--margins: bad value '", v, "'"));
      }
      fit->margins.push_back(margin);
    }
  }
  const std::string ridges = absl::GetFlag(FLAGS_ridges);
  if (!ridges.empty()) {
    fit->ridges.clear();
    for (absl::string_view v : absl::StrSplit(ridges, ',')) {
      double lambda = 0;
      if (!absl::SimpleAtod(v, &lambda) || !(lambda >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("--ridges: bad value '", v, "'"));
      }
      fit->ridges.push_back(lambda);
    }
  }
  return absl::OkStatus();
}

// Out-of-fold regret of the whole fit, selection included (cross_validation.h).
// `fit_cells` are what the fit sees (the partition's cells, or every partition's when pooled);
// only cells of `sm` are scored.
absl::Status PrintCrossValidation(const std::vector<CellTimes>& fit_cells,
                                  const policy::CostFitOptions& fit, int sm) {
  const std::pair<const char*, std::vector<int>> schemes[] = {
      {"nested leave-one-out", policy::CellNameFolds(fit_cells)},
      {"leave-one-kind-out", policy::KindFolds(fit_cells)}};
  for (const auto& [name, folds] : schemes) {
    PKV_ASSIGN_OR_RETURN(policy::CvReport cv, policy::CrossValidateFit(fit_cells, fit, folds, sm));
    std::printf(
        "  cv %-20s (%d folds): geomean regret %.4f, worst %.3f (%s), worst vs fused %.3f\n", name,
        cv.folds, cv.gm_regret, cv.worst_regret, cv.worst_cell.c_str(), cv.worst_vs_fused);
  }
  return absl::OkStatus();
}

absl::StatusOr<PolicyFile> Calibrate(const std::vector<CellTimes>& cells,
                                     const std::vector<CellTimes>& fit_cells, int sm,
                                     const policy::ReadOptions& ro) {
  PolicyFile file;
  file.kind = absl::GetFlag(FLAGS_kind);
  file.gpu_name = absl::GetFlag(FLAGS_gpu_name);
  file.num_sms = sm;
  file.ctas_per_sm = ro.ctas_per_sm;
  file.shape = ro.shape;
  const std::string source = absl::GetFlag(FLAGS_source);
  file.source = source.empty() ? absl::GetFlag(FLAGS_measurements) : source;
  file.cells = static_cast<int32_t>(cells.size());
  PKV_ASSIGN_OR_RETURN(file.threshold, policy::FitThresholdRules(cells, {}));
  file.has_threshold = true;
  policy::CostFitOptions fit;
  fit.drop_never_best = absl::GetFlag(FLAGS_drop_never_best);
  fit.min_best_lead = absl::GetFlag(FLAGS_min_best_lead);
  fit.clamp_inputs = absl::GetFlag(FLAGS_clamp);
  if (!absl::GetFlag(FLAGS_route_inputs)) fit.route_base = {};
  const std::string selection = absl::GetFlag(FLAGS_selection);
  if (selection == "per_route") {
    fit.selection = policy::InputSelection::kPerRouteError;
  } else if (selection == "regret_per_route") {
    fit.selection = policy::InputSelection::kRegretPerRoute;
  } else if (selection != "regret") {
    return absl::InvalidArgumentError("--selection: supported regret, per_route, regret_per_route");
  }
  PKV_RETURN_IF_ERROR(ApplyFitFlags(&fit));
  PKV_ASSIGN_OR_RETURN(file.learned, policy::FitCostModel(fit_cells, fit, &file.learned_report));
  file.has_learned = true;
  std::vector<std::string> inputs;
  for (decode::Route r : policy::kCandidateRoutes) {
    std::vector<std::string> names;
    for (policy::Input in : file.learned.routes[static_cast<int>(r)].inputs) {
      names.push_back(std::string(InputName(in)));
    }
    inputs.push_back(
        names.empty() ? absl::StrCat(decode::RouteName(r), " not modelled (never fastest)")
                      : absl::StrCat(decode::RouteName(r), " {", absl::StrJoin(names, ", "), "}"));
  }
  std::printf("## %d SMs: %zu calibration cells\n", sm, cells.size());
  std::printf(
      "learned: inputs %s, ridge %g, default %s, margin %g; leave-one-out regret: geomean %.4f, "
      "worst %.3f; "
      "fit RMS log error %.3f\n",
      absl::StrJoin(inputs, "; ").c_str(), file.learned.ridge,
      std::string(decode::RouteName(file.learned.default_route)).c_str(), file.learned.margin,
      file.learned_report.loo_gm_regret, file.learned_report.loo_worst_regret,
      file.learned_report.fit_rms_log_error);
  if (absl::GetFlag(FLAGS_cv)) PKV_RETURN_IF_ERROR(PrintCrossValidation(fit_cells, fit, sm));
  std::printf("threshold: %s\n", DescribeRules(file.threshold).c_str());
  for (const char* kind : {"learned", "threshold"}) {
    PKV_ASSIGN_OR_RETURN(auto p, policy::MakePolicy(file, kind));
    PKV_ASSIGN_OR_RETURN(auto outcomes, policy::EvaluatePolicy(*p, cells));
    const policy::EvalSummary s = policy::Summarize(outcomes);
    std::printf(
        "  %-9s on its own calibration cells (in-sample): worst regret %.3f (%s), "
        "geomean %.4f\n",
        kind, s.worst_regret, s.worst_cell.c_str(), s.gm_regret);
  }
  return file;
}

absl::Status Run() {
  const std::string measurements = absl::GetFlag(FLAGS_measurements);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (measurements.empty()) {
    return absl::InvalidArgumentError("--measurements FILE (a pkv-bench kernels TSV) is required");
  }
  if (absl::GetFlag(FLAGS_kind) != "learned" && absl::GetFlag(FLAGS_kind) != "threshold") {
    return absl::InvalidArgumentError("--kind: supported learned, threshold");
  }
  policy::ReadOptions ro;
  ro.shape = KvShapeFromFlags();
  PKV_RETURN_IF_ERROR(decode::ValidateShape(ro.shape));
  ro.ctas_per_sm = absl::GetFlag(FLAGS_ctas_per_sm);
  ro.sm_count = absl::GetFlag(FLAGS_sm_count);
  PKV_RETURN_IF_ERROR(policy::SelectKvDtype(absl::GetFlag(FLAGS_kv_dtype), &ro));
  PKV_ASSIGN_OR_RETURN(std::vector<CellTimes> all, policy::ReadMeasurements(measurements, ro));
  if (const std::string files = absl::GetFlag(FLAGS_traces); !files.empty()) {
    PKV_ASSIGN_OR_RETURN(const policy::TraceLengths traces, policy::ReadTraceFiles(files));
    PKV_RETURN_IF_ERROR(policy::AttachLengthShape(traces, ro, &all));
  }
  const std::vector<int32_t> sms = policy::SmCounts(all);
  if (sms.empty()) return absl::InvalidArgumentError("no measurements for the requested SMs");
  if (!out.empty() && sms.size() > 1) {
    return absl::InvalidArgumentError("--out takes one SM partition; use --sm_count or --out_dir");
  }
  for (int32_t sm : sms) {
    const std::vector<CellTimes> cells = policy::CompleteCells(all, sm);
    if (cells.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no cell at ", sm, " SMs has every route"));
    }
    std::vector<CellTimes> fit_cells = cells;
    if (absl::GetFlag(FLAGS_pool)) {
      fit_cells.clear();
      for (int32_t other : sms) {
        for (CellTimes& c : policy::CompleteCells(all, other)) fit_cells.push_back(std::move(c));
      }
    }
    PKV_ASSIGN_OR_RETURN(PolicyFile file, Calibrate(cells, fit_cells, sm, ro));
    const std::string path =
        !out.empty()
            ? out
            : absl::StrCat(absl::GetFlag(FLAGS_out_dir), "/",
                           policy::PolicyFileName(file.gpu_name, sm, ro.shape.kv_elem_bytes));
    PKV_RETURN_IF_ERROR(policy::WritePolicyFile(path, file));
    std::printf("wrote %s\n\n", path.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int CalibrateMain() { return RunSubcommand("calibrate", Run); }

}  // namespace pkv::bench
