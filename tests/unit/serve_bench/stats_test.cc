// Statistics of the serving benchmark. Percentile references are numpy.percentile's default
// ("linear") results, computed independently of this code.
#include "bench/serve/stats.h"

#include <cmath>

#include "gtest/gtest.h"

namespace pkv::serve_bench {
namespace {

TEST(ServeBenchPercentileTest, MatchesNumpyLinear) {
  // numpy.percentile([10, 7, 4, 3, 2, 1], 50) == 3.5 (numpy's documentation example).
  EXPECT_DOUBLE_EQ(Percentile({10, 7, 4, 3, 2, 1}, 50), 3.5);
  // numpy.percentile(range(1, 11), [50, 90, 99]) == [5.5, 9.1, 9.91]
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 5.5);
  EXPECT_NEAR(Percentile(v, 90), 9.1, 1e-12);
  EXPECT_NEAR(Percentile(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 10);
  // numpy.percentile([15, 20, 35, 40, 50], 40) == 29.0
  EXPECT_DOUBLE_EQ(Percentile({15, 20, 35, 40, 50}, 40), 29.0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(ServeBenchSummarizeTest, MeanMaxAndEmpty) {
  const Distribution d = Summarize({4, 1, 3, 2});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_DOUBLE_EQ(d.p50, 2.5);
  EXPECT_DOUBLE_EQ(d.max, 4);
  EXPECT_TRUE(std::isnan(Summarize({}).p50));
}

RequestRecord Ok(double send, double first, double end, uint32_t completion,
                 std::vector<double> chunks, const std::string& worker, uint32_t prompt,
                 uint32_t cached) {
  RequestRecord r;
  r.send_s = send;
  r.first_token_s = first;
  r.end_s = end;
  r.chunk_s = std::move(chunks);
  r.completed = true;
  r.completion_tokens = completion;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  r.worker_id = worker;
  return r;
}

TEST(ServeBenchComputeStatsTest, LatenciesThroughputGoodputErrorsAndCache) {
  std::vector<RequestRecord> records;
  // TTFT 100 ms, 5 tokens over 0.4 s after it: TPOT 100 ms; chunks 0.1 apart.
  records.push_back(Ok(0.0, 0.1, 0.5, 5, {0.1, 0.2, 0.3, 0.4, 0.5}, "w0", 100, 60));
  // TTFT 300 ms, 3 tokens, 0.2 s after it: TPOT 100 ms.
  records.push_back(Ok(1.0, 1.3, 1.5, 3, {1.3, 1.4, 1.5}, "w1", 50, 0));
  RequestRecord failed;
  failed.send_s = 1.5;
  failed.end_s = 2.0;
  failed.status_code = 14;  // UNAVAILABLE
  records.push_back(failed);
  RequestRecord no_complete;  // OK status without a Complete message is not a success
  no_complete.send_s = 1.0;
  no_complete.end_s = 1.2;
  records.push_back(no_complete);

  const RunStats s = ComputeStats(records, Slo{absl::Milliseconds(200), absl::ZeroDuration()});
  EXPECT_EQ(s.requests, 4);
  EXPECT_EQ(s.ok, 2);
  EXPECT_EQ(s.errors_by_code.at("UNAVAILABLE"), 1);
  EXPECT_EQ(s.errors_by_code.at("OK_WITHOUT_COMPLETE"), 1);
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 4.0);             // 8 tokens / 2 s
  EXPECT_DOUBLE_EQ(s.total_throughput, (8 + 150) / 2.0);  // prompt + completion
  EXPECT_NEAR(s.ttft_ms.p50, 200, 1e-9);
  EXPECT_NEAR(s.ttft_ms.max, 300, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p50, 100, 1e-9);
  EXPECT_EQ(s.itl_ms.count, 4 + 2);
  EXPECT_NEAR(s.itl_ms.p50, 100, 1e-9);
  EXPECT_NEAR(s.e2e_ms.p50, 500, 1e-9);
  EXPECT_EQ(s.good, 1);  // only the 100 ms TTFT meets the 200 ms SLO
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);
  EXPECT_NEAR(s.cache_hit_rate, 60.0 / 150.0, 1e-12);
  ASSERT_EQ(s.workers.size(), 2u);
  EXPECT_EQ(s.workers[0].worker_id, "w0");
  EXPECT_NEAR(s.workers[0].cache_hit_rate, 0.6, 1e-12);
  EXPECT_NEAR(s.workers[1].ttft_p50_ms, 300, 1e-9);
  EXPECT_EQ(s.ttft_after_e2e, 0);

  const RunStats tpot_slo =
      ComputeStats(records, Slo{absl::ZeroDuration(), absl::Milliseconds(50)});
  EXPECT_EQ(tpot_slo.good, 0);  // both TPOTs are 100 ms
  EXPECT_EQ(ComputeStats(records, Slo{}).good, 2);
}

TEST(ServeBenchStatusCodeNameTest, Names) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(42), "CODE_42");
}

}  // namespace
}  // namespace pkv::serve_bench
