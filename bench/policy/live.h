// `pkv-bench policy --live`: measures the candidate routes of every trace line on this GPU (or an
// SM partition of it) through the engine, with pkv-bench kernels' measurement loop (KernelsBench:
// plan, upload, L2 flush, CUDA events), and returns them as policy cells. CUDA builds only.
// Not thread-safe (owns the calling thread's CUDA context while it runs).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/policy/measurements.h"

namespace pkv::bench {

struct LiveOptions {
  std::string trace;  // trace grid file (gen.py format)
  std::string lines;  // comma-separated substrings selecting lines; empty: all
  int sm_count = 0;   // SM partition (green context); 0: the whole GPU
  int iters = 30;
  KvShape shape{32, 8, 128, 16};
  std::string out_tsv;  // also write pkv-bench kernels' TSV here (re-evaluable offline)
};

struct LiveResult {
  std::string gpu_name;
  int sm_count = 0;
  int ctas_per_sm = 0;
  std::vector<policy::CellTimes> cells;
};

absl::StatusOr<LiveResult> MeasureLive(const LiveOptions& options);

}  // namespace pkv::bench
