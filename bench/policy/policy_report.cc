#include "bench/policy/policy_report.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/policy/route_policy.h"

namespace pkv::bench {

using decode::Route;
using policy::CellOutcome;
using policy::EvalSummary;

namespace {

std::string Name(Route r) { return std::string(decode::RouteName(r)); }

std::string RouteMix(const EvalSummary& s) {
  std::string out;
  for (Route r : policy::kCandidateRoutes) {
    const int n = s.chosen_count[static_cast<int>(r)];
    if (n > 0) absl::StrAppend(&out, out.empty() ? "" : " ", Name(r), " ", n);
  }
  return out;
}

}  // namespace

void PrintCellTable(std::FILE* f, const std::vector<policy::CellTimes>& cells,
                    const std::vector<PolicyRun>& runs, const std::vector<int>& shown) {
  std::string head = "| cell | fused | split | workqueue | persistent | best |";
  std::string rule = "|---|---|---|---|---|---|";
  for (int i : shown) {
    absl::StrAppend(&head, " ", runs[i].name, " | regret | vs fused |");
    absl::StrAppend(&rule, "---|---|---|");
  }
  std::fprintf(f, "%s\n%s\n", head.c_str(), rule.c_str());
  for (size_t c = 0; c < cells.size(); ++c) {
    const policy::CellTimes& cell = cells[c];
    std::string line = absl::StrFormat("| %s | %.1f | %.1f | %.1f | %.1f | %s |", cell.cell,
                                       cell.time(Route::kFused), cell.time(Route::kSplit),
                                       cell.time(Route::kWorkqueue), cell.time(Route::kPersistent),
                                       Name(cell.best()));
    for (int i : shown) {
      const CellOutcome& o = runs[i].outcomes[c];
      absl::StrAppend(&line, absl::StrFormat(" %s | %.3f | %.2fx |", Name(o.chosen), o.regret(),
                                             o.speedup_vs_fused()));
    }
    std::fprintf(f, "%s\n", line.c_str());
  }
}

std::string SummaryLine(int sm_count, const PolicyRun& run) {
  const EvalSummary s = policy::Summarize(run.outcomes);
  return absl::StrFormat(
      "%-18s %3d SMs, %d cells: worst regret %.3f (%s), geomean regret %.3f, geomean speed-up "
      "vs fused %.3fx, worst vs fused %.3f (%s), cells > 3%% slower than fused: %d; routes: %s",
      run.name, sm_count, s.cells, s.worst_regret, s.worst_cell, s.gm_regret, s.gm_speedup_vs_fused,
      s.worst_vs_fused, s.worst_vs_fused_cell, s.slower_than_fused_3pct, RouteMix(s));
}

void PrintSummaries(std::FILE* f, int sm_count, const std::vector<PolicyRun>& runs) {
  std::fprintf(f, "```\n");
  for (const PolicyRun& run : runs) std::fprintf(f, "%s\n", SummaryLine(sm_count, run).c_str());
  std::fprintf(f, "```\n");
}

void PrintSmTable(std::FILE* f, const std::vector<int>& sm_counts,
                  const std::vector<std::vector<PolicyRun>>& runs_by_sm,
                  const std::string& per_cell_policy) {
  std::fprintf(f,
               "| SMs | policy | routes chosen | geomean speed-up vs fused | geomean regret | "
               "worst regret |\n|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < sm_counts.size(); ++i) {
    for (const PolicyRun& run : runs_by_sm[i]) {
      const EvalSummary s = policy::Summarize(run.outcomes);
      std::fprintf(f, "| %d | %s | %s | %.2fx | %.3f | %.3f (%s) |\n", sm_counts[i],
                   run.name.c_str(), RouteMix(s).c_str(), s.gm_speedup_vs_fused, s.gm_regret,
                   s.worst_regret, s.worst_cell.c_str());
    }
  }
  // Per cell: the named policy's route and speed-up against fused at each SM count.
  std::map<std::string, std::vector<std::string>> by_cell;
  std::vector<std::string> order;
  for (size_t i = 0; i < sm_counts.size(); ++i) {
    for (const PolicyRun& run : runs_by_sm[i]) {
      if (run.name != per_cell_policy) continue;
      for (const CellOutcome& o : run.outcomes) {
        auto& row = by_cell[o.cell];
        if (row.empty()) order.push_back(o.cell);
        row.resize(sm_counts.size());
        row[i] = absl::StrFormat("%s %.2fx (best %s)", Name(o.chosen), o.speedup_vs_fused(),
                                 Name(o.best));
      }
    }
  }
  std::string head = absl::StrCat("\n| cell (", per_cell_policy, ") |");
  std::string rule = "|---|";
  for (int sm : sm_counts) {
    absl::StrAppend(&head, " ", sm, " SMs |");
    absl::StrAppend(&rule, "---|");
  }
  std::fprintf(f, "%s\n%s\n", head.c_str(), rule.c_str());
  for (const std::string& cell : order) {
    std::string line = absl::StrCat("| ", cell, " |");
    for (const std::string& v : by_cell[cell]) absl::StrAppend(&line, " ", v, " |");
    std::fprintf(f, "%s\n", line.c_str());
  }
}

}  // namespace pkv::bench
