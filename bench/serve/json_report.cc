#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/serve/report.h"

namespace pkv::serve_bench {
namespace {

// Appends JSON text: strings escaped per RFC 8259, non-finite numbers as null.
class JsonOut {
 public:
  std::string& str() { return s_; }
  JsonOut& Key(absl::string_view key) {
    Comma();
    Quoted(key);
    s_ += ':';
    fresh_ = true;
    return *this;
  }
  void Open(char c) {
    Comma();
    s_ += c;
    fresh_ = true;
  }
  void Close(char c) {
    s_ += c;
    fresh_ = false;
  }
  void Number(double v) {
    Comma();
    s_ += std::isfinite(v) ? absl::StrFormat("%.17g", v) : "null";
  }
  void Int(int64_t v) {
    Comma();
    absl::StrAppend(&s_, v);
  }
  void Bool(bool v) {
    Comma();
    s_ += v ? "true" : "false";
  }
  void String(absl::string_view v) {
    Comma();
    Quoted(v);
  }

 private:
  void Quoted(absl::string_view v) {
    s_ += '"';
    for (unsigned char c : v) {
      if (c == '"' || c == '\\') {
        s_ += '\\';
        s_ += static_cast<char>(c);
      } else if (c < 0x20) {
        s_ += absl::StrFormat("\\u%04x", c);
      } else {
        s_ += static_cast<char>(c);
      }
    }
    s_ += '"';
  }
  void Comma() {
    if (!fresh_ && !s_.empty()) s_ += ',';
    fresh_ = false;
  }
  std::string s_;
  bool fresh_ = true;
};

void WriteDistribution(const char* name, const Distribution& d, JsonOut& j) {
  j.Key(name).Open('{');
  j.Key("count").Int(d.count);
  j.Key("mean").Number(d.mean);
  j.Key("p50").Number(d.p50);
  j.Key("p90").Number(d.p90);
  j.Key("p99").Number(d.p99);
  j.Key("max").Number(d.max);
  j.Close('}');
}

void WriteStats(const RunStats& s, JsonOut& j) {
  j.Key("requests").Int(s.requests);
  j.Key("ok").Int(s.ok);
  j.Key("duration_s").Number(s.duration_s);
  j.Key("request_throughput").Number(s.request_throughput);
  j.Key("output_token_throughput").Number(s.output_throughput);
  j.Key("total_token_throughput").Number(s.total_throughput);
  WriteDistribution("ttft_ms", s.ttft_ms, j);
  WriteDistribution("itl_ms", s.itl_ms, j);
  WriteDistribution("tpot_ms", s.tpot_ms, j);
  WriteDistribution("e2e_ms", s.e2e_ms, j);
  j.Key("good_requests").Int(s.good);
  j.Key("goodput").Number(s.goodput);
  j.Key("ttft_after_e2e").Int(s.ttft_after_e2e);
  j.Key("prompt_tokens").Int(s.prompt_tokens);
  j.Key("completion_tokens").Int(s.completion_tokens);
  j.Key("cached_tokens").Int(s.cached_tokens);
  j.Key("cache_hit_rate").Number(s.cache_hit_rate);
  j.Key("errors_by_code").Open('{');
  for (const auto& [code, count] : s.errors_by_code) j.Key(code).Int(count);
  j.Close('}');
  j.Key("workers").Open('[');
  for (const WorkerStats& w : s.workers) {
    j.Open('{');
    j.Key("worker_id").String(w.worker_id);
    j.Key("requests").Int(w.requests);
    j.Key("ttft_p50_ms").Number(w.ttft_p50_ms);
    j.Key("prompt_tokens").Int(w.prompt_tokens);
    j.Key("cached_tokens").Int(w.cached_tokens);
    j.Key("cache_hit_rate").Number(w.cache_hit_rate);
    j.Close('}');
  }
  j.Close(']');
}

void WriteCounter(const char* name, const CounterCheck& c, JsonOut& j) {
  j.Key(name).Open('{');
  j.Key("checked").Bool(c.checked);
  j.Key("error").String(c.error);
  j.Key("benchmark_count").Int(c.benchmark_count);
  j.Key("target_count").Int(c.target_count);
  j.Key("match").Bool(c.match);
  j.Close('}');
}

void WriteRun(const RunResult& r, JsonOut& j) {
  j.Open('{');
  j.Key("target").String(TargetName(r.target));
  j.Key("load").String(r.load_label);
  j.Key("request_rate").Number(r.request_rate);
  j.Key("concurrency").Int(r.concurrency);
  WriteStats(r.stats, j);
  j.Key("wall_s").Number(r.wall_seconds);
  j.Key("cpu_s").Number(r.cpu_seconds);
  j.Key("cpu_fraction_of_core").Number(r.cpu_fraction);
  WriteCounter("counter", r.counter, j);
  if (r.warmup_requests > 0) {
    j.Key("warmup").Open('{');
    j.Key("requests").Int(r.warmup_requests);
    j.Key("ok").Int(r.warmup_ok);
    j.Key("stats_with_warmup").Open('{');
    WriteStats(r.stats_with_warmup, j);
    j.Close('}');
    j.Close('}');
  }
  j.Close('}');
}

void WriteLength(const char* name, const LengthDistribution& d, JsonOut& j) {
  j.Key(name).Open('{');
  j.Key("mean").Number(d.mean);
  j.Key("sigma").Number(d.sigma);
  j.Key("max").Int(d.max);
  j.Close('}');
}

void WriteOptions(const BenchOptions& o, JsonOut& j) {
  const WorkloadOptions& w = o.workload;
  j.Key("options").Open('{');
  j.Key("workload").String(WorkloadKindName(w.kind));
  j.Key("seed").Int(static_cast<int64_t>(w.seed));
  WriteLength("input_len", w.input, j);
  WriteLength("output_len", w.output, j);
  j.Key("system_prompt_tokens").Int(w.system_prompt_tokens);
  j.Key("turns").Int(w.turns);
  j.Key("max_conversations").Int(w.max_conversations);
  j.Key("num_docs").Int(w.num_docs);
  j.Key("doc_tokens").Int(w.doc_tokens);
  j.Key("vocab_size").Int(w.vocab_size);
  j.Key("max_context").Int(w.max_context);
  j.Key("arrival").String(ArrivalKindName(o.load.arrival));
  j.Key("num_requests").Int(o.load.num_requests);
  j.Key("warmup_requests").Int(o.warmup_requests);
  j.Key("duration_s").Number(absl::ToDoubleSeconds(o.load.duration));
  j.Key("request_timeout_s").Number(absl::ToDoubleSeconds(o.load.request_timeout));
  j.Key("slo_ttft_ms").Number(absl::ToDoubleMilliseconds(o.slo.ttft));
  j.Key("slo_tpot_ms").Number(absl::ToDoubleMilliseconds(o.slo.tpot));
  j.Key("metrics_address").String(o.metrics_address);
  j.Key("metrics_counter").String(o.metrics_counter);
  j.Close('}');
}

}  // namespace

std::string ReportJson(const BenchReport& report) {
  JsonOut j;
  j.Open('{');
  j.Key("workload").String(report.workload);
  WriteOptions(report.options, j);
  j.Key("runs").Open('[');
  for (const RunResult& r : report.runs) WriteRun(r, j);
  j.Close(']');
  if (report.has_router_overhead) {
    j.Key("router_overhead_ttft_p50_ms").Number(report.router_overhead_ttft_p50_ms);
  }
  j.Close('}');
  j.str() += '\n';
  return std::move(j.str());
}

std::string RecordsJsonl(const RunResult& run) {
  std::string out;
  for (const RequestRecord& r : run.records) {
    JsonOut j;
    j.Open('{');
    j.Key("target").String(TargetName(run.target));
    j.Key("load").String(run.load_label);
    j.Key("phase").String(r.warmup ? "warmup" : "timed");
    j.Key("index").Int(r.index);
    j.Key("session_id").String(r.session_id);
    j.Key("conversation").Int(r.conversation);
    j.Key("turn").Int(r.turn);
    j.Key("worker").String(r.worker_id);
    j.Key("status").String(StatusCodeName(r.status_code));
    j.Key("prompt_len").Int(r.prompt_len);
    j.Key("prompt_tokens").Int(r.prompt_tokens);
    j.Key("cached_tokens").Int(r.cached_tokens);
    j.Key("completion_tokens").Int(r.completion_tokens);
    j.Key("send_s").Number(r.send_s);
    j.Key("ttft_ms").Number(r.first_token_s >= 0 ? 1e3 * r.ttft_s() : std::nan(""));
    j.Key("e2e_ms").Number(1e3 * r.e2e_s());
    j.Key("itl_ms").Open('[');
    for (size_t i = 1; i < r.chunk_s.size(); ++i) j.Number(1e3 * (r.chunk_s[i] - r.chunk_s[i - 1]));
    j.Close(']');
    j.Close('}');
    out += j.str();
    out += '\n';
  }
  return out;
}

}  // namespace pkv::serve_bench
