// Output of `pkv-bench kernels`: a TSV for machines (one row per trace line x route variant,
// columns named for the policy fitter) and a table for people.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/kernels/kernels_bench.h"

namespace pkv::bench {

struct RunInfo {
  int sm_count = 0;
  std::string sm_mode;
  double stream_gbps = 0;
  std::map<std::string, double> flashinfer_us;  // trace -> best FlashInfer GPU time (optional)
};

void WriteTsvHeader(std::FILE* f);
void WriteTsvRow(std::FILE* f, const RowResult& r, const RunInfo& info);
void PrintTableHeader(std::FILE* f);
void PrintTableRow(std::FILE* f, const RowResult& r, const RunInfo& info);

}  // namespace pkv::bench
