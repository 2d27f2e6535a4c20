// The serving benchmark, one level above the driver: runs a workload against a target (router or
// one worker) at one load point, and measures what the numbers need beside the records: the
// benchmark's own CPU time (getrusage, all its threads) and the target's own request counter
// scraped from /metrics before and after. `pkv bench serve` (client/bench_serve_command.cc) and
// the integration test call it. Blocking; runs on the caller's thread (see driver.h).
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
  double cpu_seconds = 0;   // user + system time of this process during the run
  double cpu_fraction = 0;  // cpu_seconds / wall_seconds: share of one core
  CounterCheck counter;
  std::vector<RequestRecord> records;  // only with keep_records
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
