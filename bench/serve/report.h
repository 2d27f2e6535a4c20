// Report writers of the serving benchmark: a human table (one block per run, or one row per run
// for a rate sweep) and a JSON document with everything. Pure formatting; no I/O beyond the
// FILE* given.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/serve/serve_bench.h"

namespace pkv::serve_bench {

struct BenchReport {
  std::string workload;  // a one-line description of the workload options
  BenchOptions options;  // as run (the last run's target); written without the channel
  std::vector<RunResult> runs;
  // --target both: the same workload through the router and straight to one worker.
  bool has_router_overhead = false;
  double router_overhead_ttft_p50_ms = 0;  // router run's TTFT p50 - worker run's
};

// Latencies, throughput, goodput, errors, per worker, CPU and the counter check of one run.
void PrintRun(const RunResult& run, std::FILE* out);
// One row per run: target and load, req/s, tok/s, TTFT/TPOT/E2E p50/p99, goodput, errors, CPU.
void PrintSweepTable(const std::vector<RunResult>& runs, std::FILE* out);
// Everything as one JSON object (numbers NaN/inf written as null).
std::string ReportJson(const BenchReport& report);
// One JSON object a line per request of `run.records` (kept with keep_records), for attributing a
// tail: target, load, phase (warmup | timed), index, session_id, conversation, turn, worker,
// status, prompt_len, prompt_tokens, cached_tokens, completion_tokens, send_s (from the run's
// start), ttft_ms (null without a token), e2e_ms, itl_ms (the gaps between its token chunks).
std::string RecordsJsonl(const RunResult& run);

}  // namespace pkv::serve_bench
