// The serving benchmark (bench/serve/) against real processes: pkv-router and two CPU workers
// with the tiny model. A short multi-turn run at 50 requests/s must finish every request OK, agree
// with the router's own request counter, time every first token before its end, and write a
// report that parses; the same workload straight to one worker over pkv.v1.Worker must too. The
// routed run starts with 8 warm-up requests: left out of the statistics, in the router's count,
// and flagged in the per-request dump.
#include "bench/serve/serve_bench.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bench/serve/report.h"
#include "common/json.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"

namespace pkv::testing {
namespace {

using serve_bench::BenchOptions;
using serve_bench::RunResult;
using serve_bench::Target;

BenchOptions MultiTurnAt50(const std::string& address, Target target) {
  BenchOptions o;
  o.load.target = target;
  o.load.channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  o.load.request_rate = 50;
  o.load.num_requests = 40;
  o.load.request_timeout = absl::Seconds(60);
  o.load.seed = 3;
  o.workload.kind = serve_bench::WorkloadKind::kMultiTurn;
  o.workload.seed = 3;
  o.workload.input = {24, 0.5, 1 << 20};
  o.workload.output = {6, 0.5, 1 << 20};
  o.workload.system_prompt_tokens = 32;
  o.workload.turns = 4;
  o.keep_records = true;
  return o;
}

void ExpectAllOk(const RunResult& run) {
  const int64_t warmup = run.warmup_requests;
  ASSERT_EQ(run.records.size(), static_cast<size_t>(40 + warmup));
  for (size_t i = 0; i < run.records.size(); ++i) {
    const serve_bench::RequestRecord& r = run.records[i];
    EXPECT_EQ(r.warmup, static_cast<int64_t>(i) < warmup) << i;  // warm-up records first
    EXPECT_EQ(r.warmup, r.index < warmup) << i;                  // the first sent
  }
  EXPECT_EQ(run.stats.requests, 40);
  EXPECT_EQ(run.stats.ok, 40);
  EXPECT_TRUE(run.stats.errors_by_code.empty());
  for (const serve_bench::RequestRecord& r : run.records) {
    EXPECT_GE(r.first_token_s, r.send_s) << r.index;
    EXPECT_LE(r.ttft_s(), r.e2e_s()) << r.index;
    EXPECT_EQ(r.completion_tokens, r.max_tokens) << r.index;  // ignore_eos: lengths are forced
    EXPECT_EQ(r.tokens_received, r.completion_tokens) << r.index;
    EXPECT_EQ(r.prompt_tokens, r.prompt_len) << r.index;
  }
  EXPECT_LE(run.stats.ttft_ms.p50, run.stats.e2e_ms.p50);
  EXPECT_EQ(run.stats.ttft_after_e2e, 0);
}

TEST(ServeBenchIntegrationTest, MultiTurnThroughTheRouterAndStraightToAWorker) {
  ClusterOptions options;
  options.num_workers = 2;
  auto cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  Cluster& c = **cluster;

  BenchOptions via_router = MultiTurnAt50(c.router_address(), Target::kRouter);
  via_router.metrics_address = c.router_metrics_address();
  via_router.warmup_requests = 8;
  auto info = serve_bench::FetchModelInfo(via_router.load.channel, Target::kRouter, {});
  ASSERT_TRUE(info.ok()) << info.status();
  serve_bench::ApplyModelInfo(*info, via_router.workload);
  EXPECT_EQ(via_router.workload.vocab_size, 512u);
  absl::StatusOr<RunResult> routed = serve_bench::RunBenchmark(via_router);
  ASSERT_TRUE(routed.ok()) << routed.status();
  ExpectAllOk(*routed);
  EXPECT_TRUE(routed->counter.checked);
  EXPECT_TRUE(routed->counter.error.empty()) << routed->counter.error;
  EXPECT_EQ(routed->counter.target_count, 48);  // the router counts the warm-up too
  EXPECT_TRUE(routed->counter.match);
  EXPECT_EQ(routed->warmup_requests, 8);
  EXPECT_EQ(routed->warmup_ok, 8);
  EXPECT_EQ(routed->stats_with_warmup.requests, 48);
  EXPECT_EQ(routed->stats_with_warmup.ok, 48);
  // Every turn of a conversation carries its session_id: the router keeps it on one worker.
  std::map<std::string, std::set<std::string>> workers_of_session;
  for (const serve_bench::RequestRecord& r : routed->records) {
    ASSERT_FALSE(r.session_id.empty());
    workers_of_session[r.session_id].insert(r.worker_id);
  }
  EXPECT_LT(workers_of_session.size(), 40u);  // some conversations had several turns
  for (const auto& [session, workers] : workers_of_session) {
    EXPECT_EQ(workers.size(), 1u) << session;
  }

  BenchOptions direct = MultiTurnAt50(c.worker(0).address(), Target::kWorker);
  auto worker_info = serve_bench::FetchModelInfo(direct.load.channel, Target::kWorker, {});
  ASSERT_TRUE(worker_info.ok()) << worker_info.status();
  serve_bench::ApplyModelInfo(*worker_info, direct.workload);
  absl::StatusOr<RunResult> straight = serve_bench::RunBenchmark(direct);
  ASSERT_TRUE(straight.ok()) << straight.status();
  ExpectAllOk(*straight);
  ASSERT_EQ(straight->stats.workers.size(), 1u);
  EXPECT_EQ(straight->stats.workers[0].worker_id, c.worker(0).id);

  serve_bench::BenchReport report;
  report.workload = "multi_turn";
  report.runs = {*routed, *straight};
  report.has_router_overhead = true;
  report.router_overhead_ttft_p50_ms = routed->stats.ttft_ms.p50 - straight->stats.ttft_ms.p50;
  const std::string path = c.log_dir() + "/serve_bench.json";
  std::ofstream(path) << serve_bench::ReportJson(report);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  absl::StatusOr<JsonValue> json = ParseJson(text.str());
  ASSERT_TRUE(json.ok()) << json.status();
  const JsonValue& runs = *json->Find("runs");
  ASSERT_EQ(runs.items().size(), 2u);
  EXPECT_EQ(runs.items()[0].Find("ok")->integer(), 40);
  EXPECT_EQ(runs.items()[0].Find("counter")->Find("target_count")->integer(), 48);
  EXPECT_TRUE(runs.items()[0].Find("counter")->Find("match")->bool_value());
  EXPECT_EQ(runs.items()[1].Find("target")->str(), "worker");
  EXPECT_TRUE(json->Find("router_overhead_ttft_p50_ms")->is_number());
  EXPECT_EQ(runs.items()[0].Find("warmup")->Find("requests")->integer(), 8);
  EXPECT_EQ(runs.items()[0].Find("warmup")->Find("stats_with_warmup")->Find("ok")->integer(), 48);
  EXPECT_EQ(runs.items()[1].Find("warmup"), nullptr);

  // The per-request dump: a line per request, warm-up first, each with its worker and timings.
  std::stringstream lines(serve_bench::RecordsJsonl(*routed));
  std::string line;
  int n = 0, warm = 0;
  while (std::getline(lines, line)) {
    absl::StatusOr<JsonValue> record = ParseJson(line);
    ASSERT_TRUE(record.ok()) << record.status() << ": " << line;
    ++n;
    if (record->Find("phase")->str() == "warmup") ++warm;
    EXPECT_EQ(record->Find("status")->str(), "OK");
    EXPECT_FALSE(record->Find("worker")->str().empty());
    EXPECT_GE(record->Find("ttft_ms")->number(), 0);
    EXPECT_GE(record->Find("e2e_ms")->number(), record->Find("ttft_ms")->number());
    // The worker's interval (its engine's arrival to its first token) lies inside the client's.
    EXPECT_GE(record->Find("worker_queue_ms")->number(), 0);
    EXPECT_GE(record->Find("worker_ttft_ms")->number(), record->Find("worker_queue_ms")->number());
    EXPECT_LE(record->Find("worker_ttft_ms")->number(), record->Find("ttft_ms")->number());
    EXPECT_EQ(record->Find("itl_ms")->items().size() + 1, routed->records[n - 1].chunk_s.size());
  }
  EXPECT_EQ(n, 48);
  EXPECT_EQ(warm, 8);
}

}  // namespace
}  // namespace pkv::testing
