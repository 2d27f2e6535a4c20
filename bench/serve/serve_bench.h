// The serving benchmark, one level above the driver: runs a workload against a target (router or
// one worker) at one load point, and measures what the numbers need beside the records: the
// benchmark's own CPU time (getrusage, all its threads) and the target's own request counter
// scraped from /metrics before and after. `pkv bench serve` (client/bench_serve_command.cc) and
// the integration test call it. Blocking; runs on the caller's thread (see driver.h).
//
// Warm-up (BenchOptions::warmup_requests > 0): the first warmup_requests requests of the run (in
// send order) warm the target up and are left out of RunResult::stats, as serving benchmarks
// report (genai-perf's --warmup-request-count); the timed requests follow without a pause (no
// barrier: a closed loop that drained and restarted would send its whole concurrency at once and
// time that burst instead). num_requests counts the timed requests; a duration bound covers both.
// RunResult::stats_with_warmup covers every request, so a report can give the percentiles with and
// without the warm-up. The target's counter must grow by both together (it cannot tell them
// apart mid-run); the report gives the two counts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/driver.h"
#include "bench/serve/stats.h"
#include "bench/serve/workload.h"
#include "grpcpp/channel.h"
#include "pkv/v1/common.pb.h"

namespace pkv::serve_bench {

const char* TargetName(Target target);
absl::StatusOr<Target> ParseTarget(const std::string& name);

struct BenchOptions {
  LoadOptions load;
  WorkloadOptions workload;  // vocab_size / max_context / eos from the target (FetchModelInfo)
  Slo slo;
  // host:port of the target's Prometheus endpoint; empty = no counter comparison.
  std::string metrics_address;
  // Sum over labels of this counter before and after must grow by the requests the benchmark
  // finished (the router counts every finished Generate stream by code).
  std::string metrics_counter = "pkv_router_requests_total";
  bool keep_records = false;  // RunResult::records
  // Requests sent first to warm the target up (0 = none); not in RunResult::stats.
  int64_t warmup_requests = 0;
};

struct CounterCheck {
  bool checked = false;  // metrics_address was set
  std::string error;     // scrape failure (then `match` is false)
  double before = 0, after = 0;
  int64_t benchmark_count = 0;  // requests the benchmark finished
  int64_t target_count = 0;     // after - before
  bool match = false;
};

struct RunResult {
  Target target = Target::kRouter;
  std::string load_label;  // "rate 50/s poisson" or "concurrency 8"
  double request_rate = 0;
  int concurrency = 0;
  RunStats stats;
  double wall_seconds = 0;
  double cpu_seconds = 0;   // user + system time of this process during the run (warm-up too)
  double cpu_fraction = 0;  // cpu_seconds / wall_seconds: share of one core
  CounterCheck counter;     // every request sent, warm-up included
  // With BenchOptions::warmup_requests > 0: the warm-up's requests (finished, and OK), and the
  // statistics over every request, warm-up included.
  int64_t warmup_requests = 0;
  int64_t warmup_ok = 0;
  RunStats stats_with_warmup;
  // Only with keep_records: the warm-up's records (RequestRecord::warmup) then the timed ones,
  // each part in finish order.
  std::vector<RequestRecord> records;
};

// GetModelInfo of the target (Generation or Worker service), with a 10 s deadline.
absl::StatusOr<pkv::v1::ModelInfo> FetchModelInfo(
    const std::shared_ptr<grpc::Channel>& channel, Target target,
    const std::vector<std::pair<std::string, std::string>>& metadata);

// Copies vocab_size, max_context and the EOS ids into the workload options.
void ApplyModelInfo(const pkv::v1::ModelInfo& info, WorkloadOptions& workload);

// One load point. INVALID_ARGUMENT for bad options (no bound, no rate and no concurrency).
absl::StatusOr<RunResult> RunBenchmark(const BenchOptions& options);

}  // namespace pkv::serve_bench
