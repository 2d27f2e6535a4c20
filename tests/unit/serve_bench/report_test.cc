// Report writers and the /metrics reader: the JSON parses with the project's own reader
// (common/json.h, not the writer's code) and carries the numbers; a counter sums over labels.
#include "bench/serve/report.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "bench/serve/prometheus_scrape.h"
#include "common/json.h"
#include "gtest/gtest.h"

namespace pkv::serve_bench {
namespace {

TEST(ServeBenchReportJsonTest, ParsesAndCarriesTheNumbers) {
  RequestRecord r;
  r.send_s = 0;
  r.first_token_s = 0.01;
  r.end_s = 0.05;
  r.completed = true;
  r.completion_tokens = 5;
  r.prompt_tokens = 10;
  r.worker_id = "w\"0\\\n";  // escaped on the way out
  RequestRecord bad;
  bad.status_code = 8;
  BenchReport report;
  report.workload = "sharegpt \"quoted\"";
  report.options.workload.kind = WorkloadKind::kLongDoc;
  report.options.workload.doc_tokens = 300;
  report.options.slo.ttft = absl::Milliseconds(250);
  RunResult run;
  run.load_label = "rate 5/s poisson";
  run.request_rate = 5;
  run.stats = ComputeStats({r, bad}, Slo{});
  run.counter.checked = true;
  run.counter.benchmark_count = 2;
  run.counter.target_count = 2;
  run.counter.match = true;
  report.runs.push_back(run);
  report.has_router_overhead = true;
  report.router_overhead_ttft_p50_ms = 0.25;

  absl::StatusOr<JsonValue> json = ParseJson(ReportJson(report));
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << ReportJson(report);
  EXPECT_EQ(json->Find("workload")->str(), "sharegpt \"quoted\"");
  EXPECT_DOUBLE_EQ(json->Find("router_overhead_ttft_p50_ms")->number(), 0.25);
  const JsonValue& options = *json->Find("options");
  EXPECT_EQ(options.Find("workload")->str(), "long_doc");
  EXPECT_EQ(options.Find("doc_tokens")->integer(), 300);
  EXPECT_DOUBLE_EQ(options.Find("slo_ttft_ms")->number(), 250);
  EXPECT_TRUE(options.Find("input_len")->Find("sigma")->is_number());
  const JsonValue& runs = *json->Find("runs");
  ASSERT_EQ(runs.items().size(), 1u);
  const JsonValue& j = runs.items()[0];
  EXPECT_EQ(j.Find("requests")->integer(), 2);
  EXPECT_EQ(j.Find("ok")->integer(), 1);
  EXPECT_NEAR(j.Find("ttft_ms")->Find("p50")->number(), 10, 1e-9);
  EXPECT_TRUE(j.Find("tpot_ms")->Find("p99")->is_number());
  EXPECT_TRUE(j.Find("cached_tokens")->is_integer());
  EXPECT_EQ(j.Find("errors_by_code")->Find("RESOURCE_EXHAUSTED")->integer(), 1);
  EXPECT_EQ(j.Find("workers")->items()[0].Find("worker_id")->str(), "w\"0\\\n");
  EXPECT_TRUE(j.Find("counter")->Find("match")->bool_value());
  EXPECT_TRUE(j.Find("itl_ms")->Find("p50")->is_null());  // one chunk: no ITL, NaN -> null
}

TEST(ServeBenchRecordsJsonlTest, OneParsableLinePerRequestWithItsTimings) {
  RequestRecord warm;
  warm.warmup = true;
  warm.index = 0;
  warm.conversation = 3;
  warm.turn = 2;
  warm.session_id = "conv-3";
  warm.worker_id = "w1";
  warm.prompt_len = warm.prompt_tokens = 40;
  warm.cached_tokens = 32;
  warm.completion_tokens = 3;
  warm.completed = true;
  warm.send_s = 1.0;
  warm.first_token_s = 1.02;
  warm.chunk_s = {1.02, 1.025, 1.035};
  warm.end_s = 1.04;
  warm.worker_queue_s = 0.004;
  warm.worker_ttft_s = 0.015;
  RequestRecord failed;  // no token: TTFT null, no ITL
  failed.index = 1;
  failed.status_code = 14;
  failed.send_s = 2.0;
  failed.end_s = 2.5;
  RunResult run;
  run.load_label = "concurrency 4";
  run.records = {warm, failed};

  std::vector<JsonValue> lines;
  std::stringstream text(RecordsJsonl(run));
  for (std::string line; std::getline(text, line);) {
    absl::StatusOr<JsonValue> json = ParseJson(line);
    ASSERT_TRUE(json.ok()) << json.status() << ": " << line;
    lines.push_back(*json);
  }
  ASSERT_EQ(lines.size(), 2u);
  const JsonValue& w = lines[0];
  EXPECT_EQ(w.Find("phase")->str(), "warmup");
  EXPECT_EQ(w.Find("load")->str(), "concurrency 4");
  EXPECT_EQ(w.Find("conversation")->integer(), 3);
  EXPECT_EQ(w.Find("turn")->integer(), 2);
  EXPECT_EQ(w.Find("worker")->str(), "w1");
  EXPECT_EQ(w.Find("cached_tokens")->integer(), 32);
  EXPECT_EQ(w.Find("status")->str(), "OK");
  EXPECT_NEAR(w.Find("ttft_ms")->number(), 20, 1e-9);
  EXPECT_NEAR(w.Find("e2e_ms")->number(), 40, 1e-9);
  EXPECT_NEAR(w.Find("worker_queue_ms")->number(), 4, 1e-9);
  EXPECT_NEAR(w.Find("worker_ttft_ms")->number(), 15, 1e-9);
  ASSERT_EQ(w.Find("itl_ms")->items().size(), 2u);
  EXPECT_NEAR(w.Find("itl_ms")->items()[0].number(), 5, 1e-9);
  EXPECT_NEAR(w.Find("itl_ms")->items()[1].number(), 10, 1e-9);
  const JsonValue& f = lines[1];
  EXPECT_EQ(f.Find("phase")->str(), "timed");
  EXPECT_EQ(f.Find("status")->str(), "UNAVAILABLE");
  EXPECT_TRUE(f.Find("ttft_ms")->is_null());
  EXPECT_TRUE(f.Find("worker_queue_ms")->is_null());  // no Complete message
  EXPECT_TRUE(f.Find("worker_ttft_ms")->is_null());
  EXPECT_TRUE(f.Find("itl_ms")->items().empty());
}

TEST(ServeBenchSumMetricTest, SumsEveryLabelSetOfOneName) {
  const std::string text =
      "# HELP pkv_router_requests_total Finished Generate streams\n"
      "# TYPE pkv_router_requests_total counter\n"
      "pkv_router_requests_total{code=\"OK\"} 40\n"
      "pkv_router_requests_total{code=\"UNAVAILABLE\"} 2 1700000000000\n"
      "pkv_router_requests_total_extra 100\n"
      "pkv_router_request_duration_seconds_count 7\n";
  EXPECT_DOUBLE_EQ(*SumMetric(text, "pkv_router_requests_total"), 42);
  EXPECT_DOUBLE_EQ(*SumMetric(text, "pkv_router_request_duration_seconds_count"), 7);
  EXPECT_DOUBLE_EQ(*SumMetric(text, "absent_total"), 0);
  EXPECT_FALSE(SumMetric("x_total{a=\"b\"} many\n", "x_total").ok());
}

TEST(ServeBenchFetchMetricsTest, UnreachableIsAnError) {
  EXPECT_FALSE(FetchMetrics("127.0.0.1:1").ok());
  EXPECT_FALSE(FetchMetrics("no-port").ok());
}

}  // namespace
}  // namespace pkv::serve_bench
