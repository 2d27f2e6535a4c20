#include "bench/serve/serve_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/serve/prometheus_scrape.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "pkv/v1/worker.grpc.pb.h"

namespace pkv::serve_bench {
namespace {

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

absl::StatusOr<double> ScrapeCounter(const BenchOptions& options) {
  absl::StatusOr<std::string> text = FetchMetrics(options.metrics_address);
  if (!text.ok()) return text.status();
  return SumMetric(*text, options.metrics_counter);
}

// Scrapes the counter's value before the run (when metrics_address is set).
CounterCheck StartCounterCheck(const BenchOptions& options) {
  CounterCheck check;
  check.checked = !options.metrics_address.empty();
  if (!check.checked) return check;
  absl::StatusOr<double> before = ScrapeCounter(options);
  if (before.ok()) check.before = *before;
  if (!before.ok()) check.error = std::string(before.status().message());
  return check;
}

// After a run of `finished` requests. The target counts a stream when it finishes it, which can be
// a moment after the client saw the status: polls for up to 3 s until the counts agree.
void EndCounterCheck(const BenchOptions& options, int64_t finished, CounterCheck& check) {
  check.benchmark_count = finished;
  if (!check.checked || !check.error.empty()) return;
  for (int attempt = 0; attempt < 30; ++attempt) {
    absl::StatusOr<double> after = ScrapeCounter(options);
    if (!after.ok()) {
      check.error = std::string(after.status().message());
      return;
    }
    check.after = *after;
    check.target_count = static_cast<int64_t>(check.after - check.before);
    check.match = check.target_count == check.benchmark_count;
    if (check.match) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::Status Validate(const BenchOptions& options) {
  const LoadOptions& load = options.load;
  if (load.channel == nullptr) return absl::InvalidArgumentError("no channel");
  if (load.request_rate <= 0 && load.concurrency < 1) {
    return absl::InvalidArgumentError("give a --request_rate > 0 or a --concurrency >= 1");
  }
  if (options.warmup_requests < 0) {
    return absl::InvalidArgumentError("--warmup_requests must be >= 0");
  }
  if (load.num_requests <= 0 && load.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("give --num_requests > 0 or --duration > 0");
  }
  return absl::OkStatus();
}

}  // namespace

const char* TargetName(Target target) { return target == Target::kRouter ? "router" : "worker"; }

absl::StatusOr<Target> ParseTarget(const std::string& name) {
  if (name == "router") return Target::kRouter;
  if (name == "worker") return Target::kWorker;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target '", name, "'; expected router or worker"));
}

absl::StatusOr<pkv::v1::ModelInfo> FetchModelInfo(
    const std::shared_ptr<grpc::Channel>& channel, Target target,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ctx.set_wait_for_ready(true);
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  pkv::v1::ModelInfo info;
  grpc::Status status;
  if (target == Target::kRouter) {
    status = pkv::v1::Generation::NewStub(channel)->GetModelInfo(&ctx, {}, &info);
  } else {
    status = pkv::v1::Worker::NewStub(channel)->GetModelInfo(&ctx, {}, &info);
  }
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("GetModelInfo: ", status.error_message()));
  }
  return info;
}

void ApplyModelInfo(const pkv::v1::ModelInfo& info, WorkloadOptions& workload) {
  workload.vocab_size = info.vocab_size();
  workload.max_context = info.max_context();
  workload.eos_token_ids.assign(info.eos_token_ids().begin(), info.eos_token_ids().end());
}

absl::StatusOr<RunResult> RunBenchmark(const BenchOptions& options) {
  absl::Status valid = Validate(options);
  if (!valid.ok()) return valid;
  absl::StatusOr<std::unique_ptr<Workload>> workload = MakeWorkload(options.workload);
  if (!workload.ok()) return workload.status();
  RunResult result;
  result.target = options.load.target;
  result.request_rate = options.load.request_rate;
  result.concurrency = options.load.concurrency;
  result.load_label = options.load.request_rate > 0
                          ? absl::StrFormat("rate %g/s %s", options.load.request_rate,
                                            ArrivalKindName(options.load.arrival))
                          : absl::StrCat("concurrency ", options.load.concurrency);
  LoadOptions load = options.load;
  if (load.num_requests > 0) load.num_requests += options.warmup_requests;
  result.counter = StartCounterCheck(options);
  const double cpu0 = CpuSeconds();
  const auto wall0 = std::chrono::steady_clock::now();
  std::vector<RequestRecord> records = RunLoad(load, **workload);
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  result.cpu_seconds = CpuSeconds() - cpu0;
  result.cpu_fraction = result.wall_seconds > 0 ? result.cpu_seconds / result.wall_seconds : 0;
  EndCounterCheck(options, static_cast<int64_t>(records.size()), result.counter);
  // The warm-up's records first (each part in finish order), then the timed ones.
  for (RequestRecord& r : records) r.warmup = r.index < options.warmup_requests;
  const auto timed_begin = std::stable_partition(records.begin(), records.end(),
                                                 [](const RequestRecord& r) { return r.warmup; });
  result.warmup_requests = timed_begin - records.begin();
  result.warmup_ok =
      std::count_if(records.begin(), timed_begin, [](const RequestRecord& r) { return r.ok(); });
  result.stats = ComputeStats(std::vector<RequestRecord>(timed_begin, records.end()), options.slo);
  if (options.warmup_requests > 0) result.stats_with_warmup = ComputeStats(records, options.slo);
  if (options.keep_records) result.records = std::move(records);
  return result;
}

}  // namespace pkv::serve_bench
