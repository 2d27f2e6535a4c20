#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/serve/report.h"

namespace pkv::serve_bench {
namespace {

void PrintDistribution(const char* name, const Distribution& d, std::FILE* out) {
  absl::FPrintF(out, "  %-6s ms  mean %9.2f  p50 %9.2f  p90 %9.2f  p99 %9.2f  max %9.2f  (n=%d)\n",
                name, d.mean, d.p50, d.p90, d.p99, d.max, d.count);
}

void PrintCounter(const char* what, const CounterCheck& c, std::FILE* out) {
  if (!c.checked) return;
  if (!c.error.empty()) {
    absl::FPrintF(out, "  %s: scrape failed: %s\n", what, c.error);
  } else {
    absl::FPrintF(out, "  %s: %d, benchmark: %d  %s\n", what, c.target_count, c.benchmark_count,
                  c.match ? "(match)" : "MISMATCH");
  }
}

}  // namespace

void PrintRun(const RunResult& run, std::FILE* out) {
  const RunStats& s = run.stats;
  absl::FPrintF(out, "== %s, %s: %d requests in %.2f s, %d ok\n", TargetName(run.target),
                run.load_label, s.requests, s.duration_s, s.ok);
  PrintDistribution("TTFT", s.ttft_ms, out);
  PrintDistribution("ITL", s.itl_ms, out);
  PrintDistribution("TPOT", s.tpot_ms, out);
  PrintDistribution("E2E", s.e2e_ms, out);
  absl::FPrintF(out, "  throughput  %.2f req/s  %.1f output tok/s  %.1f total tok/s\n",
                s.request_throughput, s.output_throughput, s.total_throughput);
  absl::FPrintF(out, "  goodput     %.2f req/s (%d of %d ok requests met the SLO)\n", s.goodput,
                s.good, s.ok);
  absl::FPrintF(out, "  cache hit   %.3f (%d of %d prompt tokens cached)\n", s.cache_hit_rate,
                s.cached_tokens, s.prompt_tokens);
  for (const auto& [code, count] : s.errors_by_code) {
    absl::FPrintF(out, "  errors      %s: %d\n", code, count);
  }
  for (const WorkerStats& w : s.workers) {
    absl::FPrintF(out, "  worker %-12s %6d requests  TTFT p50 %8.2f ms  cache hit %.3f\n",
                  w.worker_id.empty() ? "(none)" : w.worker_id, w.requests, w.ttft_p50_ms,
                  w.cache_hit_rate);
  }
  absl::FPrintF(out, "  benchmark CPU %.3f s over %.2f s wall = %.3f of one core\n",
                run.cpu_seconds, run.wall_seconds, run.cpu_fraction);
  PrintCounter(run.warmup_requests > 0 ? "target counter (warm-up included)" : "target counter",
               run.counter, out);
  if (run.warmup_requests == 0) return;
  absl::FPrintF(out, "  warm-up     the first %d requests (%d ok), not above\n",
                run.warmup_requests, run.warmup_ok);
  absl::FPrintF(out, "  with the warm-up's requests (%d, %d ok):\n", run.stats_with_warmup.requests,
                run.stats_with_warmup.ok);
  PrintDistribution("TTFT", run.stats_with_warmup.ttft_ms, out);
  PrintDistribution("E2E", run.stats_with_warmup.e2e_ms, out);
}

void PrintSweepTable(const std::vector<RunResult>& runs, std::FILE* out) {
  absl::FPrintF(out, "%-30s %8s %9s %9s %9s %9s %9s %9s %8s %6s %6s %6s\n", "load", "req/s",
                "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p99", "goodput",
                "errors", "hit", "cpu");
  for (const RunResult& r : runs) {
    const RunStats& s = r.stats;
    absl::FPrintF(out, "%-30s %8.2f %9.1f %9.2f %9.2f %9.2f %9.2f %9.2f %8.2f %6d %6.3f %6.3f%s\n",
                  absl::StrCat(TargetName(r.target), " ", r.load_label), s.request_throughput,
                  s.output_throughput, s.ttft_ms.p50, s.ttft_ms.p99, s.tpot_ms.p50, s.tpot_ms.p99,
                  s.e2e_ms.p99, s.goodput, s.requests - s.ok, s.cache_hit_rate, r.cpu_fraction,
                  r.counter.checked && !r.counter.match ? "  COUNTER MISMATCH" : "");
  }
}

}  // namespace pkv::serve_bench
