// `pkv bench serve`: the serving benchmark (bench/serve/) against a router, one worker, or both.
// Reads the flags, fetches the model's vocabulary from the target, runs each load point (one, or
// each rate of --rate_sweep), prints a block per run (a table row each for a sweep), and writes
// --json_out.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/serve/progress.h"
#include "bench/serve/report.h"
#include "bench/serve/serve_bench.h"
#include "client/bench_serve_flags.h"
#include "client/commands.h"
#include "client/flags.h"

namespace pkv::client {
namespace {

using serve_bench::BenchOptions;
using serve_bench::RunResult;
using serve_bench::Target;

absl::StatusOr<serve_bench::WorkloadOptions> WorkloadFromFlags(uint64_t seed) {
  absl::StatusOr<serve_bench::WorkloadKind> kind =
      serve_bench::ParseWorkloadKind(absl::GetFlag(FLAGS_workload));
  if (!kind.ok()) return kind.status();
  serve_bench::WorkloadOptions w;
  w.kind = *kind;
  w.seed = seed;
  w.input = {absl::GetFlag(FLAGS_input_len), absl::GetFlag(FLAGS_len_sigma)};
  w.output = {absl::GetFlag(FLAGS_output_len), absl::GetFlag(FLAGS_len_sigma)};
  w.system_prompt_tokens = absl::GetFlag(FLAGS_system_prompt_tokens);
  w.session_ids = absl::GetFlag(FLAGS_session_ids);
  w.turns = absl::GetFlag(FLAGS_turns);
  w.max_conversations = absl::GetFlag(FLAGS_conversations);
  w.num_docs = absl::GetFlag(FLAGS_num_docs);
  w.doc_tokens = absl::GetFlag(FLAGS_doc_tokens);
  return w;
}

absl::StatusOr<std::vector<double>> Rates() {
  std::vector<double> rates;
  for (const std::string& text : absl::GetFlag(FLAGS_rate_sweep)) {
    double rate = 0;
    if (!absl::SimpleAtod(text, &rate) || !(rate > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("--rate_sweep: '", text, "' is not > 0"));
    }
    rates.push_back(rate);
  }
  if (rates.empty()) rates.push_back(absl::GetFlag(FLAGS_request_rate));
  return rates;
}

// Everything but the target, the channel and the rate.
absl::StatusOr<BenchOptions> OptionsFromFlags() {
  const uint64_t seed = absl::GetFlag(FLAGS_seed).value_or(0);
  absl::StatusOr<serve_bench::WorkloadOptions> workload = WorkloadFromFlags(seed);
  if (!workload.ok()) return workload.status();
  absl::StatusOr<serve_bench::ArrivalKind> arrival =
      serve_bench::ParseArrivalKind(absl::GetFlag(FLAGS_arrival));
  if (!arrival.ok()) return arrival.status();
  BenchOptions o;
  o.workload = *workload;
  o.load.arrival = *arrival;
  o.load.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.load.num_requests = absl::GetFlag(FLAGS_num_requests);
  o.load.duration = absl::GetFlag(FLAGS_duration);
  o.load.request_timeout = absl::GetFlag(FLAGS_request_timeout);
  o.load.seed = seed;
  if (const std::optional<double> t = absl::GetFlag(FLAGS_temperature)) {
    o.load.temperature = static_cast<float>(*t);
  }
  if (const std::optional<double> p = absl::GetFlag(FLAGS_top_p)) {
    o.load.top_p = static_cast<float>(*p);
  }
  const std::string key = ApiKey();
  if (!key.empty()) o.load.metadata.emplace_back("authorization", "Bearer " + key);
  o.slo = {absl::GetFlag(FLAGS_slo_ttft), absl::GetFlag(FLAGS_slo_tpot)};
  if (o.slo.ttft < absl::ZeroDuration() || o.slo.tpot < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--slo_ttft and --slo_tpot must be >= 0 (0 = none)");
  }
  o.metrics_counter = absl::GetFlag(FLAGS_metrics_counter);
  o.warmup_requests = absl::GetFlag(FLAGS_warmup_requests);
  o.keep_records = !absl::GetFlag(FLAGS_dump_requests).empty();
  return o;
}

// Points `o` at the target: its channel, its model's vocabulary, and (router only) its metrics.
absl::Status AimAt(Target target, BenchOptions& o) {
  const std::string address =
      target == Target::kRouter ? absl::GetFlag(FLAGS_router) : absl::GetFlag(FLAGS_worker);
  if (address.empty()) return absl::InvalidArgumentError("--target worker needs --worker");
  o.load.target = target;
  o.load.channel = MakeChannel(address);
  if (o.load.channel == nullptr) return absl::InvalidArgumentError("bad TLS settings");
  absl::StatusOr<pkv::v1::ModelInfo> info =
      serve_bench::FetchModelInfo(o.load.channel, target, o.load.metadata);
  if (!info.ok())
    return absl::Status(info.status().code(), absl::StrCat(address, ": ", info.status().message()));
  serve_bench::ApplyModelInfo(*info, o.workload);
  o.metrics_address = target == Target::kRouter ? absl::GetFlag(FLAGS_metrics_url) : "";
  return absl::OkStatus();
}

absl::StatusOr<RunResult> RunPoint(BenchOptions o, double rate) {
  o.load.request_rate = rate;
  o.load.request_id_prefix = absl::StrFormat("bench-%s-%d", serve_bench::TargetName(o.load.target),
                                             absl::ToUnixMillis(absl::Now()));
  if (absl::GetFlag(FLAGS_progress)) {
    const std::string label = absl::StrCat(serve_bench::TargetName(o.load.target), " ",
                                           rate > 0 ? absl::StrCat(rate, "/s") : "closed");
    o.load.progress = serve_bench::MakeProgressPrinter(stderr, isatty(fileno(stderr)), label);
  }
  return serve_bench::RunBenchmark(o);
}

std::string DescribeWorkload(const BenchOptions& o) {
  const serve_bench::WorkloadOptions& w = o.workload;
  return absl::StrFormat(
      "%s seed %d input %g output %g sigma %g system %d turns %d docs %dx%d vocab %d context %d",
      serve_bench::WorkloadKindName(w.kind), w.seed, w.input.mean, w.output.mean, w.input.sigma,
      w.system_prompt_tokens, w.turns, w.num_docs, w.doc_tokens, w.vocab_size, w.max_context);
}

int WriteJson(const serve_bench::BenchReport& report) {
  const std::string path = absl::GetFlag(FLAGS_json_out);
  if (path.empty()) return 0;
  std::ofstream out(path);
  out << serve_bench::ReportJson(report);
  if (!out.good()) return UsageError("cannot write --json_out " + path);
  std::fprintf(stderr, "wrote %s\n", path.c_str());
  return 0;
}

int WriteRequestDump(const serve_bench::BenchReport& report) {
  const std::string path = absl::GetFlag(FLAGS_dump_requests);
  if (path.empty()) return 0;
  std::ofstream out(path);
  for (const RunResult& run : report.runs) out << serve_bench::RecordsJsonl(run);
  if (!out.good()) return UsageError("cannot write --dump_requests " + path);
  std::fprintf(stderr, "wrote %s\n", path.c_str());
  return 0;
}

absl::StatusOr<std::vector<Target>> Targets() {
  const std::string flag = absl::GetFlag(FLAGS_target);
  if (flag == "both") return std::vector<Target>{Target::kRouter, Target::kWorker};
  absl::StatusOr<Target> t = serve_bench::ParseTarget(flag);
  if (!t.ok()) return absl::InvalidArgumentError("--target: expected router, worker or both");
  return std::vector<Target>{*t};
}

// One load point against one target, appended to `report` (printed when `print`). Returns the
// exit code to stop with, or 0.
int RunOnePoint(const BenchOptions& base, Target target, double rate, bool print,
                serve_bench::BenchReport& report) {
  BenchOptions o = base;
  absl::Status aimed = AimAt(target, o);
  if (aimed.code() == absl::StatusCode::kInvalidArgument) {
    return UsageError(std::string(aimed.message()));
  }
  if (!aimed.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(aimed.message()).c_str());
    return static_cast<int>(aimed.code());
  }
  report.workload = DescribeWorkload(o);
  report.options = o;
  report.options.load.channel = nullptr;
  absl::StatusOr<RunResult> run = RunPoint(std::move(o), rate);
  if (!run.ok()) return UsageError(std::string(run.status().message()));
  if (print) serve_bench::PrintRun(*run, stdout);
  report.runs.push_back(std::move(*run));
  return 0;
}

// --target both: runs come in (router, worker) pairs, one per load point.
void PrintRouterOverhead(serve_bench::BenchReport& report) {
  for (size_t i = 0; i + 1 < report.runs.size(); i += 2) {
    const double router = report.runs[i].stats.ttft_ms.p50;
    const double worker = report.runs[i + 1].stats.ttft_ms.p50;
    std::printf("router overhead: TTFT p50 %+.3f ms (router %.3f - worker %.3f, %s)\n",
                router - worker, router, worker, report.runs[i].load_label.c_str());
    if (i == 0) {  // the JSON's single figure: the first load point
      report.has_router_overhead = true;
      report.router_overhead_ttft_p50_ms = router - worker;
    }
  }
}

}  // namespace

int RunBenchServe() {
  absl::StatusOr<BenchOptions> options = OptionsFromFlags();
  absl::StatusOr<std::vector<double>> rates = Rates();
  absl::StatusOr<std::vector<Target>> targets = Targets();
  for (const absl::Status& st : {options.status(), rates.status(), targets.status()}) {
    if (!st.ok()) return UsageError(std::string(st.message()));
  }
  serve_bench::BenchReport report;
  for (double rate : *rates) {
    for (Target target : *targets) {
      const int rc = RunOnePoint(*options, target, rate, rates->size() == 1, report);
      if (rc != 0) return rc;
    }
  }
  if (rates->size() > 1) serve_bench::PrintSweepTable(report.runs, stdout);
  if (targets->size() == 2) PrintRouterOverhead(report);
  std::printf("workload: %s\n", report.workload.c_str());
  const int json = WriteJson(report);
  if (json != 0) return json;
  const int dump = WriteRequestDump(report);
  if (dump != 0) return dump;
  bool all_ok = true;
  for (const RunResult& run : report.runs) {
    all_ok =
        all_ok && run.stats.ok == run.stats.requests && (!run.counter.checked || run.counter.match);
  }
  return all_ok ? 0 : 1;
}

}  // namespace pkv::client
