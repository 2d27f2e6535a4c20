// pkv-bench calibrate: fits the route policies (the paper's thresholds and the learned cost
// model) on kernel measurements of one GPU and writes one policy file per SM partition.
//
//   pkv-bench calibrate --measurements sweep_calibration.tsv --gpu_name "NVIDIA H200"
//       [--sm_count N (0: every partition in the file)] [--out_dir policies | --out FILE]
//       [--kind learned|threshold] [--hq 32 --hkv 8 --d 128 --page 16 --ctas_per_sm 2]
//       [--traces a.tsv,b.tsv] (the trace grids the sweep replayed: recompute each cell's
//       features from its lengths, checked against the f_* columns, for the length-shape inputs)
//       [--cv 1] (out-of-fold regret of the whole fit: nested leave-one-out, leave-one-kind-out)
//       fit options (bench/NOTES.md, "Policy v2 attempt"): --selection regret|per_route|
//       regret_per_route, --candidates a,b,.. --max_extra_inputs N --min_gain G --ridges l,..
//       --margins m,.. --pool 1 (fit on every SM partition's cells, score this one)
//
// Fit on calibration measurements only (../shared/traces/README.md): the held-out and third
// grids are for `pkv-bench policy`. The shape and CTAs per SM describe how the measurements were
// taken (pkv-bench kernels' defaults) and are recorded in the file.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/kernels/flags.h"
#include "common/status_macros.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/cross_validation.h"
#include "kernels/policy/evaluate.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/policy_file.h"
#include "kernels/policy/threshold_policy.h"
#include "kernels/policy/trace_join.h"

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
absl::Status ApplyFitFlags(const Flags& flags, policy::CostFitOptions* fit) {
  if (!flags.Str("candidates").empty()) {
    fit->candidates.clear();
    for (absl::string_view name : absl::StrSplit(flags.Str("candidates"), ',')) {
      PKV_ASSIGN_OR_RETURN(policy::Input in, policy::ParseInput(name));
      fit->candidates.push_back(in);
    }
  }
  if (flags.Int("max_extra_inputs") >= 0) fit->max_extra_inputs = flags.Int("max_extra_inputs");
  if (!flags.Str("min_gain").empty() && !absl::SimpleAtod(flags.Str("min_gain"), &fit->min_gain)) {
    return absl::InvalidArgumentError("--min_gain: not a number");
  }
  if (!flags.Str("margins").empty()) {
    fit->margins.clear();
    for (absl::string_view v : absl::StrSplit(flags.Str("margins"), ',')) {
      double margin = 0;
      if (!absl::SimpleAtod(v, &margin) || !(margin >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("--margins: bad value '", v, "'"));
      }
      fit->margins.push_back(margin);
    }
  }
  if (!flags.Str("ridges").empty()) {
    fit->ridges.clear();
    for (absl::string_view v : absl::StrSplit(flags.Str("ridges"), ',')) {
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
                                     const policy::ReadOptions& ro, const Flags& flags) {
  PolicyFile file;
  file.kind = flags.Str("kind");
  file.gpu_name = flags.Str("gpu_name");
  file.num_sms = sm;
  file.ctas_per_sm = ro.ctas_per_sm;
  file.shape = ro.shape;
  file.source = flags.Str("source").empty() ? flags.Str("measurements") : flags.Str("source");
  file.cells = static_cast<int32_t>(cells.size());
  PKV_ASSIGN_OR_RETURN(file.threshold, policy::FitThresholdRules(cells, {}));
  file.has_threshold = true;
  policy::CostFitOptions fit;
  fit.drop_never_best = flags.Int("drop_never_best") != 0;
  fit.clamp_inputs = flags.Int("clamp") != 0;
  if (flags.Int("route_inputs") == 0) fit.route_base = {};
  if (flags.Str("selection") == "per_route") {
    fit.selection = policy::InputSelection::kPerRouteError;
  } else if (flags.Str("selection") == "regret_per_route") {
    fit.selection = policy::InputSelection::kRegretPerRoute;
  } else if (flags.Str("selection") != "regret") {
    return absl::InvalidArgumentError("--selection: supported regret, per_route, regret_per_route");
  }
  PKV_RETURN_IF_ERROR(ApplyFitFlags(flags, &fit));
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
  if (flags.Int("cv") != 0) PKV_RETURN_IF_ERROR(PrintCrossValidation(fit_cells, fit, sm));
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

absl::Status Run(const Flags& flags) {
  if (flags.Str("measurements").empty()) {
    return absl::InvalidArgumentError("--measurements FILE (a pkv-bench kernels TSV) is required");
  }
  if (flags.Str("kind") != "learned" && flags.Str("kind") != "threshold") {
    return absl::InvalidArgumentError("--kind: supported learned, threshold");
  }
  policy::ReadOptions ro;
  ro.shape = KvShape{flags.Int("hq"), flags.Int("hkv"), flags.Int("d"), flags.Int("page")};
  PKV_RETURN_IF_ERROR(decode::ValidateShape(ro.shape));
  ro.ctas_per_sm = flags.Int("ctas_per_sm");
  ro.sm_count = flags.Int("sm_count");
  PKV_ASSIGN_OR_RETURN(std::vector<CellTimes> all,
                       policy::ReadMeasurements(flags.Str("measurements"), ro));
  if (!flags.Str("traces").empty()) {
    PKV_ASSIGN_OR_RETURN(const policy::TraceLengths traces,
                         policy::ReadTraceFiles(flags.Str("traces")));
    PKV_RETURN_IF_ERROR(policy::AttachLengthShape(traces, ro, &all));
  }
  const std::vector<int32_t> sms = policy::SmCounts(all);
  if (sms.empty()) return absl::InvalidArgumentError("no measurements for the requested SMs");
  if (!flags.Str("out").empty() && sms.size() > 1) {
    return absl::InvalidArgumentError("--out takes one SM partition; use --sm_count or --out_dir");
  }
  for (int32_t sm : sms) {
    const std::vector<CellTimes> cells = policy::CompleteCells(all, sm);
    if (cells.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no cell at ", sm, " SMs has every route"));
    }
    std::vector<CellTimes> fit_cells = cells;
    if (flags.Int("pool") != 0) {
      fit_cells.clear();
      for (int32_t other : sms) {
        for (CellTimes& c : policy::CompleteCells(all, other)) fit_cells.push_back(std::move(c));
      }
    }
    PKV_ASSIGN_OR_RETURN(PolicyFile file, Calibrate(cells, fit_cells, sm, ro, flags));
    const std::string path =
        !flags.Str("out").empty()
            ? flags.Str("out")
            : absl::StrCat(flags.Str("out_dir"), "/", policy::PolicyFileName(file.gpu_name, sm));
    PKV_RETURN_IF_ERROR(policy::WritePolicyFile(path, file));
    std::printf("wrote %s\n\n", path.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int CalibrateMain(int argc, char** argv) {
  Flags flags({{"measurements", ""},
               {"traces", ""},
               {"gpu_name", "NVIDIA H200"},
               {"sm_count", "0"},
               {"out_dir", "policies"},
               {"out", ""},
               {"kind", "learned"},
               {"source", ""},
               {"selection", "regret"},
               {"drop_never_best", "1"},
               {"clamp", "1"},
               {"route_inputs", "1"},
               {"cv", "0"},
               {"candidates", ""},
               {"max_extra_inputs", "-1"},
               {"ridges", ""},
               {"min_gain", ""},
               {"pool", "0"},
               {"margins", ""},
               {"hq", "32"},
               {"hkv", "8"},
               {"d", "128"},
               {"page", "16"},
               {"ctas_per_sm", "2"}});
  return RunSubcommand("calibrate", flags, argc, argv, Run);
}

}  // namespace pkv::bench
