// pkv-bench calibrate: fits the route policies (the paper's thresholds and the learned cost
// model) on kernel measurements of one GPU and writes one policy file per SM partition.
//
//   pkv-bench calibrate --measurements sweep_calibration.tsv --gpu_name "NVIDIA H200"
//       [--sm_count N (0: every partition in the file)] [--out_dir policies | --out FILE]
//       [--kind learned|threshold] [--hq 32 --hkv 8 --d 128 --page 16 --ctas_per_sm 2]
//
// Fit on calibration measurements only (../shared/traces/README.md): the held-out and third
// grids are for `pkv-bench policy`. The shape and CTAs per SM describe how the measurements were
// taken (pkv-bench kernels' defaults) and are recorded in the file.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/kernels/flags.h"
#include "common/status_macros.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/evaluate.h"
#include "kernels/policy/measurements.h"
#include "kernels/policy/policy_file.h"
#include "kernels/policy/threshold_policy.h"

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

absl::StatusOr<PolicyFile> Calibrate(const std::vector<CellTimes>& cells, int sm,
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
  } else if (flags.Str("selection") != "regret") {
    return absl::InvalidArgumentError("--selection: supported regret, per_route");
  }
  PKV_ASSIGN_OR_RETURN(file.learned, policy::FitCostModel(cells, fit, &file.learned_report));
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
      "learned: inputs %s, ridge %g; leave-one-out regret: geomean %.4f, worst %.3f; "
      "fit RMS log error %.3f\n",
      absl::StrJoin(inputs, "; ").c_str(), file.learned.ridge, file.learned_report.loo_gm_regret,
      file.learned_report.loo_worst_regret, file.learned_report.fit_rms_log_error);
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
    PKV_ASSIGN_OR_RETURN(PolicyFile file, Calibrate(cells, sm, ro, flags));
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
               {"hq", "32"},
               {"hkv", "8"},
               {"d", "128"},
               {"page", "16"},
               {"ctas_per_sm", "2"}});
  return RunSubcommand("calibrate", flags, argc, argv, Run);
}

}  // namespace pkv::bench
