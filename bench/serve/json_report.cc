// The benchmark's JSON report and per-request JSON lines, written with nlohmann::ordered_json
// (keys in the order a reader expects; NaN and infinities become null).
#include <cmath>
#include <string>

#include "bench/serve/report.h"
#include "nlohmann/json.hpp"

namespace pkv::serve_bench {
namespace {

using Json = nlohmann::ordered_json;

// Error text and worker ids come from the network: bytes that are not UTF-8 are replaced
// rather than failing the whole report.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json DistributionJson(const Distribution& d) {
  return Json{{"count", d.count}, {"mean", d.mean}, {"p50", d.p50},
              {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

void AddStats(const RunStats& s, Json& j) {
  j["requests"] = s.requests;
  j["ok"] = s.ok;
  j["duration_s"] = s.duration_s;
  j["request_throughput"] = s.request_throughput;
  j["output_token_throughput"] = s.output_throughput;
  j["total_token_throughput"] = s.total_throughput;
  j["ttft_ms"] = DistributionJson(s.ttft_ms);
  j["itl_ms"] = DistributionJson(s.itl_ms);
  j["tpot_ms"] = DistributionJson(s.tpot_ms);
  j["e2e_ms"] = DistributionJson(s.e2e_ms);
  j["good_requests"] = s.good;
  j["goodput"] = s.goodput;
  j["ttft_after_e2e"] = s.ttft_after_e2e;
  j["prompt_tokens"] = s.prompt_tokens;
  j["completion_tokens"] = s.completion_tokens;
  j["cached_tokens"] = s.cached_tokens;
  j["cache_hit_rate"] = s.cache_hit_rate;
  Json errors = Json::object();
  for (const auto& [code, count] : s.errors_by_code) errors[code] = count;
  j["errors_by_code"] = std::move(errors);
  Json workers = Json::array();
  for (const WorkerStats& w : s.workers) {
    workers.push_back(Json{{"worker_id", w.worker_id},
                           {"requests", w.requests},
                           {"ttft_p50_ms", w.ttft_p50_ms},
                           {"prompt_tokens", w.prompt_tokens},
                           {"cached_tokens", w.cached_tokens},
                           {"cache_hit_rate", w.cache_hit_rate}});
  }
  j["workers"] = std::move(workers);
}

Json CounterJson(const CounterCheck& c) {
  return Json{{"checked", c.checked},
              {"error", c.error},
              {"benchmark_count", c.benchmark_count},
              {"target_count", c.target_count},
              {"match", c.match}};
}

Json RunJson(const RunResult& r) {
  Json j;
  j["target"] = TargetName(r.target);
  j["load"] = r.load_label;
  j["request_rate"] = r.request_rate;
  j["concurrency"] = r.concurrency;
  AddStats(r.stats, j);
  j["wall_s"] = r.wall_seconds;
  j["cpu_s"] = r.cpu_seconds;
  j["cpu_fraction_of_core"] = r.cpu_fraction;
  j["counter"] = CounterJson(r.counter);
  if (r.warmup_requests > 0) {
    Json with_warmup = Json::object();
    AddStats(r.stats_with_warmup, with_warmup);
    j["warmup"] = Json{{"requests", r.warmup_requests},
                       {"ok", r.warmup_ok},
                       {"stats_with_warmup", std::move(with_warmup)}};
  }
  return j;
}

Json LengthJson(const LengthDistribution& d) {
  return Json{{"mean", d.mean}, {"sigma", d.sigma}, {"max", d.max}};
}

Json OptionsJson(const BenchOptions& o) {
  const WorkloadOptions& w = o.workload;
  Json j;
  j["workload"] = WorkloadKindName(w.kind);
  j["seed"] = static_cast<int64_t>(w.seed);
  j["input_len"] = LengthJson(w.input);
  j["output_len"] = LengthJson(w.output);
  j["system_prompt_tokens"] = w.system_prompt_tokens;
  j["turns"] = w.turns;
  j["max_conversations"] = w.max_conversations;
  j["num_docs"] = w.num_docs;
  j["doc_tokens"] = w.doc_tokens;
  j["vocab_size"] = w.vocab_size;
  j["max_context"] = w.max_context;
  j["arrival"] = ArrivalKindName(o.load.arrival);
  j["num_requests"] = o.load.num_requests;
  j["warmup_requests"] = o.warmup_requests;
  j["duration_s"] = absl::ToDoubleSeconds(o.load.duration);
  j["request_timeout_s"] = absl::ToDoubleSeconds(o.load.request_timeout);
  j["temperature"] = o.load.temperature ? Json(*o.load.temperature) : Json(nullptr);
  j["top_p"] = o.load.top_p ? Json(*o.load.top_p) : Json(nullptr);
  j["slo_ttft_ms"] = absl::ToDoubleMilliseconds(o.slo.ttft);
  j["slo_tpot_ms"] = absl::ToDoubleMilliseconds(o.slo.tpot);
  j["metrics_address"] = o.metrics_address;
  j["metrics_counter"] = o.metrics_counter;
  return j;
}

}  // namespace

std::string ReportJson(const BenchReport& report) {
  Json j;
  j["workload"] = report.workload;
  j["options"] = OptionsJson(report.options);
  Json runs = Json::array();
  for (const RunResult& r : report.runs) runs.push_back(RunJson(r));
  j["runs"] = std::move(runs);
  if (report.has_router_overhead) {
    j["router_overhead_ttft_p50_ms"] = report.router_overhead_ttft_p50_ms;
  }
  return Dump(j) + '\n';
}

std::string RecordsJsonl(const RunResult& run) {
  std::string out;
  for (const RequestRecord& r : run.records) {
    Json itl = Json::array();
    for (size_t i = 1; i < r.chunk_s.size(); ++i)
      itl.push_back(1e3 * (r.chunk_s[i] - r.chunk_s[i - 1]));
    const Json j{{"target", TargetName(run.target)},
                 {"load", run.load_label},
                 {"phase", r.warmup ? "warmup" : "timed"},
                 {"index", r.index},
                 {"session_id", r.session_id},
                 {"conversation", r.conversation},
                 {"turn", r.turn},
                 {"worker", r.worker_id},
                 {"status", StatusCodeName(r.status_code)},
                 {"prompt_len", r.prompt_len},
                 {"prompt_tokens", r.prompt_tokens},
                 {"cached_tokens", r.cached_tokens},
                 {"completion_tokens", r.completion_tokens},
                 {"send_s", r.send_s},
                 {"ttft_ms", r.first_token_s >= 0 ? 1e3 * r.ttft_s() : std::nan("")},
                 {"worker_queue_ms", r.completed ? 1e3 * r.worker_queue_s : std::nan("")},
                 {"worker_ttft_ms", r.completed ? 1e3 * r.worker_ttft_s : std::nan("")},
                 {"e2e_ms", 1e3 * r.e2e_s()},
                 {"itl_ms", std::move(itl)}};
    out += Dump(j);
    out += '\n';
  }
  return out;
}

}  // namespace pkv::serve_bench
