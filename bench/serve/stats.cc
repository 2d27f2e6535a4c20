#include "bench/serve/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace pkv::serve_bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Ratio(double num, double den) { return den > 0 ? num / den : kNaN; }

double TpotMs(const RequestRecord& r) {
  if (r.completion_tokens < 2 || r.first_token_s < 0) return kNaN;
  return 1000.0 * (r.end_s - r.first_token_s) / (r.completion_tokens - 1);
}

bool MeetsSlo(const RequestRecord& r, const Slo& slo) {
  const double ttft_ms = absl::ToDoubleMilliseconds(slo.ttft);
  const double tpot_ms = absl::ToDoubleMilliseconds(slo.tpot);
  if (ttft_ms > 0 && !(r.first_token_s >= 0 && 1000.0 * r.ttft_s() <= ttft_ms)) return false;
  const double tpot = TpotMs(r);
  return tpot_ms <= 0 || std::isnan(tpot) || tpot <= tpot_ms;
}

std::vector<WorkerStats> PerWorker(const std::vector<RequestRecord>& records) {
  std::map<std::string, std::vector<const RequestRecord*>> by_worker;
  for (const RequestRecord& r : records) {
    if (r.ok()) by_worker[r.worker_id].push_back(&r);
  }
  std::vector<WorkerStats> out;
  for (const auto& [id, rs] : by_worker) {
    WorkerStats w;
    w.worker_id = id;
    w.requests = static_cast<int64_t>(rs.size());
    std::vector<double> ttft;
    for (const RequestRecord* r : rs) {
      if (r->first_token_s >= 0) ttft.push_back(1000.0 * r->ttft_s());
      w.prompt_tokens += r->prompt_tokens;
      w.cached_tokens += r->cached_tokens;
    }
    w.ttft_p50_ms = Percentile(std::move(ttft), 50);
    w.cache_hit_rate = Ratio(static_cast<double>(w.cached_tokens), w.prompt_tokens);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  d.count = static_cast<int64_t>(values.size());
  if (values.empty()) {
    d.mean = d.p50 = d.p90 = d.p99 = d.max = kNaN;
    return d;
  }
  std::sort(values.begin(), values.end());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  d.max = values.back();
  return d;
}

RunStats ComputeStats(const std::vector<RequestRecord>& records, const Slo& slo) {
  RunStats s;
  std::vector<double> ttft, itl, tpot, e2e;
  double first_send = std::numeric_limits<double>::infinity(), last_end = 0;
  for (const RequestRecord& r : records) {
    ++s.requests;
    first_send = std::min(first_send, r.send_s);
    last_end = std::max(last_end, r.end_s);
    if (!r.ok()) {
      ++s.errors_by_code[r.status_code == 0 ? "OK_WITHOUT_COMPLETE"
                                            : StatusCodeName(r.status_code)];
      continue;
    }
    ++s.ok;
    if (r.first_token_s >= 0) ttft.push_back(1000.0 * r.ttft_s());
    if (r.first_token_s > r.end_s) ++s.ttft_after_e2e;
    for (size_t i = 1; i < r.chunk_s.size(); ++i) {
      itl.push_back(1000.0 * (r.chunk_s[i] - r.chunk_s[i - 1]));
    }
    const double t = TpotMs(r);
    if (!std::isnan(t)) tpot.push_back(t);
    e2e.push_back(1000.0 * r.e2e_s());
    s.prompt_tokens += r.prompt_tokens;
    s.completion_tokens += r.completion_tokens;
    s.cached_tokens += r.cached_tokens;
    if (MeetsSlo(r, slo)) ++s.good;
  }
  s.duration_s = s.requests > 0 ? last_end - first_send : 0;
  s.request_throughput = Ratio(static_cast<double>(s.ok), s.duration_s);
  s.output_throughput = Ratio(static_cast<double>(s.completion_tokens), s.duration_s);
  s.total_throughput =
      Ratio(static_cast<double>(s.prompt_tokens + s.completion_tokens), s.duration_s);
  s.goodput = Ratio(static_cast<double>(s.good), s.duration_s);
  s.cache_hit_rate = Ratio(static_cast<double>(s.cached_tokens), s.prompt_tokens);
  s.ttft_ms = Summarize(std::move(ttft));
  s.itl_ms = Summarize(std::move(itl));
  s.tpot_ms = Summarize(std::move(tpot));
  s.e2e_ms = Summarize(std::move(e2e));
  s.workers = PerWorker(records);
  return s;
}

std::string StatusCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  if (code < 0 || code > 16) return "CODE_" + std::to_string(code);
  return kNames[code];
}

}  // namespace pkv::serve_bench
