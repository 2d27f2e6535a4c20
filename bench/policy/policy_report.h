// Markdown output of `pkv-bench policy`: per SM partition, a per-cell table (every route's time,
// the best route, each policy's choice, its regret and speed-up against fused) and one summary
// line per policy; across partitions, how the chosen routes and speed-ups move with the SM count.
// Benchmark code: not thread-safe (writes to a FILE).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/policy/evaluate.h"
#include "kernels/policy/measurements.h"

namespace pkv::bench {

// One policy's outcomes on the cells of one SM partition (same order as the cells).
struct PolicyRun {
  std::string name;  // "learned", "threshold", "paper-rules", "always-workqueue", ...
  std::vector<policy::CellOutcome> outcomes;
};

// Per-cell table: the route times and, for each of `shown` (indices into runs), its choice.
void PrintCellTable(std::FILE* f, const std::vector<policy::CellTimes>& cells,
                    const std::vector<PolicyRun>& runs, const std::vector<int>& shown);
// One line per run: worst / geometric-mean regret, speed-up against fused, route mix.
void PrintSummaries(std::FILE* f, int sm_count, const std::vector<PolicyRun>& runs);
std::string SummaryLine(int sm_count, const PolicyRun& run);

// Across SM partitions (runs_by_sm[i] belongs to sm_counts[i]): per partition and policy the
// route mix and speed-up, then per cell the route the named policy chooses at each SM count.
void PrintSmTable(std::FILE* f, const std::vector<int>& sm_counts,
                  const std::vector<std::vector<PolicyRun>>& runs_by_sm,
                  const std::string& per_cell_policy);

}  // namespace pkv::bench
