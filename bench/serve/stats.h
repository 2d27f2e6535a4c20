// Statistics of a serving-benchmark run: latency distributions, throughput, goodput under an SLO,
// errors by status code, prefix-cache hit rate, per worker. Pure functions of the records.
//
// Definitions (as in vLLM's benchmark_serving):
//   TTFT  first token chunk - send
//   ITL   gap between consecutive token chunks of one request (a chunk carrying several tokens
//         counts once: the router coalesces chunks for a slow reader)
//   TPOT  (E2E - TTFT) / (completion_tokens - 1), requests with >= 2 tokens
//   E2E   final status - send
// Latency distributions use OK requests only; throughputs divide by the run's duration (first
// send to last end). Goodput = OK requests meeting every set SLO (ttft <= slo.ttft and, with
// >= 2 tokens, tpot <= slo.tpot; an unset SLO, zero, always holds) per second.
// Cache hit rate = sum cached_tokens / sum prompt_tokens over OK requests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/serve/record.h"

namespace pkv::serve_bench {

// The p-th percentile, p in [0, 100], by linear interpolation between closest ranks (numpy's
// default method "linear": rank = p/100 * (n - 1)). NaN for an empty input.
double Percentile(std::vector<double> values, double p);

struct Distribution {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // NaN when count == 0
};
Distribution Summarize(std::vector<double> values);

// Goodput targets: a request is good when its TTFT and its mean time per output token are within
// them (`pkv bench serve --slo_ttft / --slo_tpot`).
struct Slo {
  absl::Duration ttft;  // zero = unset
  absl::Duration tpot;  // zero = unset
};

struct WorkerStats {
  std::string worker_id;
  int64_t requests = 0;  // OK requests it finished
  double ttft_p50_ms = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double cache_hit_rate = 0;  // NaN when prompt_tokens == 0
};

struct RunStats {
  int64_t requests = 0;  // finished, any status
  int64_t ok = 0;
  std::map<std::string, int64_t> errors_by_code;  // "UNAVAILABLE" -> count
  int64_t ttft_after_e2e = 0;  // sanity: OK requests whose first token came after their end (0)
  double duration_s = 0;
  double request_throughput = 0;  // OK requests / s
  double output_throughput = 0;   // completion tokens of OK requests / s
  double total_throughput = 0;    // prompt + completion tokens of OK requests / s
  Distribution ttft_ms, itl_ms, tpot_ms, e2e_ms;
  int64_t good = 0;
  double goodput = 0;  // good requests / s
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  double cache_hit_rate = 0;         // NaN when prompt_tokens == 0
  std::vector<WorkerStats> workers;  // sorted by worker_id
};

RunStats ComputeStats(const std::vector<RequestRecord>& records, const Slo& slo);

// "OK", "UNAVAILABLE", ... for a grpc::StatusCode number.
std::string StatusCodeName(int code);

}  // namespace pkv::serve_bench
