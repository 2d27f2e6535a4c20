// Automatic prefix caching end to end: a router in front of one CPU worker with the cache on (the
// default) and, as the reference, one with --prefix_caching=false. A repeated greedy request must
// give the same tokens and log-probabilities as the uncached worker, report cached_tokens in its
// Complete message (a resumed stream too) and count the hits in the worker's metrics; concurrent
// requests sharing a prefix must match the reference too; and the pool is whole again at idle.
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

struct RunOutcome {
  grpc::Status status;
  std::vector<uint32_t> tokens;
  std::vector<float> logprobs;
  bool completed = false;
  pkv::v1::Complete complete;
};

RunOutcome Generate(const Cluster& cluster, const std::vector<uint32_t>& prompt,
                    uint32_t max_tokens) {
  pkv::v1::GenerateRequest req = MakeRequest(prompt, max_tokens);
  req.mutable_sampling()->set_ignore_eos(true);
  req.mutable_sampling()->set_logprobs(true);
  req.mutable_sampling()->set_top_logprobs(3);
  auto stub = cluster.RouterStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  ctx.set_wait_for_ready(true);
  auto reader = stub->Generate(&ctx, req);
  RunOutcome run;
  pkv::v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (resp.has_chunk()) {
      for (uint32_t id : resp.chunk().token_ids()) run.tokens.push_back(id);
      for (const auto& lp : resp.chunk().logprobs()) {
        run.logprobs.push_back(lp.logprob());
        for (const auto& top : lp.top()) run.logprobs.push_back(top.logprob());
      }
    } else if (resp.has_complete()) {
      run.completed = true;
      run.complete = resp.complete();
    }
  }
  run.status = reader->Finish();
  return run;
}

std::vector<uint32_t> Prompt(int n, int seed) {
  std::vector<uint32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<uint32_t>((i * 37 + seed * 101 + 11) % 500));
  return p;
}

void ExpectSameRun(const RunOutcome& got, const RunOutcome& want) {
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_TRUE(got.completed);
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    EXPECT_NEAR(got.logprobs[i], want.logprobs[i], 1e-5) << "logprob " << i;
  }
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions on;
    on.num_workers = 1;
    auto a = Cluster::Start(on);
    ASSERT_TRUE(a.ok()) << a.status();
    cached_ = a->release();
    ClusterOptions off = on;
    off.worker_args = {"--prefix_caching=false"};
    auto b = Cluster::Start(off);
    ASSERT_TRUE(b.ok()) << b.status();
    uncached_ = b->release();
  }
  static void TearDownTestSuite() {
    delete cached_;
    delete uncached_;
    cached_ = uncached_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cached_, nullptr);
    ASSERT_NE(uncached_, nullptr);
  }
  static double Metric(Cluster* c, const std::string& sample) {
    return ScrapeMetric(c->worker(0).metrics_address(), sample);
  }
  // The worker runs nothing, holds no page, and its page ledger balances.
  static void ExpectIdlePoolWhole(Cluster* c) {
    const absl::Status quiescent = WaitWorkerQuiescent(c->worker(0), absl::Seconds(5));
    EXPECT_TRUE(quiescent.ok()) << quiescent;
  }

  static Cluster* cached_;
  static Cluster* uncached_;
};

Cluster* PrefixCacheTest::cached_ = nullptr;
Cluster* PrefixCacheTest::uncached_ = nullptr;

TEST_F(PrefixCacheTest, RepeatedGreedyRequestHitsAndMatchesTheUncachedWorker) {
  const std::vector<uint32_t> prompt = Prompt(40, 1);  // 2 full pages of 16 + 8 tokens
  const double hits_before = Metric(cached_, "pkv_prefix_cache_hits_total");
  const RunOutcome reference = Generate(*uncached_, prompt, 24);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message() << uncached_->Logs();
  ASSERT_EQ(reference.tokens.size(), 24u);
  EXPECT_EQ(reference.complete.cached_tokens(), 0u);

  const RunOutcome first = Generate(*cached_, prompt, 24);
  ExpectSameRun(first, reference);
  EXPECT_EQ(first.complete.cached_tokens(), 0u);
  const RunOutcome second = Generate(*cached_, prompt, 24);
  ExpectSameRun(second, reference);
  EXPECT_EQ(second.complete.cached_tokens(), 32u);
  EXPECT_EQ(second.complete.prompt_tokens(), 40u);

  EXPECT_EQ(Metric(cached_, "pkv_prefix_cache_hits_total") - hits_before, 32);
  EXPECT_GE(Metric(cached_, "vllm:prefix_cache_queries_total"), 80);
  EXPECT_GE(Metric(cached_, "vllm:prefix_cache_hits_total"), 32);
  EXPECT_GE(Metric(cached_, "pkv_prefix_cache_pages"), 2);
  ExpectIdlePoolWhole(cached_);
  EXPECT_GE(Metric(cached_, "pkv_prefix_cache_evictable_pages"), 2);
}

TEST_F(PrefixCacheTest, ConcurrentRequestsSharingAPrefixMatchTheReference) {
  // A 48-token shared "system prompt" and distinct tails.
  const std::vector<uint32_t> shared = Prompt(48, 7);
  std::vector<std::vector<uint32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<uint32_t> p = shared;
    for (int t = 0; t < 5 + i; ++t) p.push_back(static_cast<uint32_t>(400 + 13 * i + t));
    prompts.push_back(p);
  }
  std::vector<RunOutcome> want(prompts.size()), got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) want[i] = Generate(*uncached_, prompts[i], 16);
  Generate(*cached_, shared, 1);  // warms the cache with the shared pages
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = Generate(*cached_, prompts[i], 16); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    ExpectSameRun(got[i], want[i]);
    EXPECT_EQ(got[i].complete.cached_tokens(), 48u) << "the 3 shared full pages";
  }
  ExpectIdlePoolWhole(cached_);
}

// Tensor parallelism: the one scheduler plans the hits for every rank, so a --tp 2 worker serves
// a repeated request from the cache with the same tokens as the uncached --tp 1 reference.
TEST_F(PrefixCacheTest, TensorParallelWorkerHitsAndMatches) {
  ClusterOptions tp;
  tp.num_workers = 1;
  tp.worker_args = {"--backend=cpu", "--tp=2"};
  auto c = Cluster::Start(tp);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<uint32_t> prompt = Prompt(40, 5);
  const RunOutcome reference = Generate(*uncached_, prompt, 12);
  const RunOutcome first = Generate(**c, prompt, 12);
  const RunOutcome second = Generate(**c, prompt, 12);
  ASSERT_TRUE(second.status.ok()) << second.status.error_message() << (*c)->Logs();
  EXPECT_EQ(first.tokens, reference.tokens);
  EXPECT_EQ(second.tokens, reference.tokens);
  EXPECT_EQ(second.complete.cached_tokens(), 32u);
  ExpectIdlePoolWhole(c->get());
}

// Prefix-aware placement: with two workers, requests sharing a prompt prefix follow the first one
// to its worker (the router's index), so they hit that worker's cache.
TEST_F(PrefixCacheTest, RouterSendsASharedPrefixToTheWorkerThatCachesIt) {
  ClusterOptions two;
  two.num_workers = 2;
  auto c = Cluster::Start(two);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<uint32_t> shared = Prompt(48, 11);
  const RunOutcome first = Generate(**c, shared, 2);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  for (int i = 0; i < 6; ++i) {
    std::vector<uint32_t> p = shared;
    p.push_back(static_cast<uint32_t>(300 + i));
    const RunOutcome r = Generate(**c, p, 2);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.complete.worker_id(), first.complete.worker_id()) << "request " << i;
    EXPECT_EQ(r.complete.cached_tokens(), 48u) << "request " << i;
  }
  EXPECT_GE(ScrapeMetric((*c)->router_metrics_address(),
                         "pkv_router_placements_total{reason=\"prefix\"}"),
            6);
  EXPECT_GE(
      ScrapeMetric((*c)->router_metrics_address(), "pkv_router_prefix_estimated_hit_blocks_total"),
      6 * 3);
}

// A migrated stream (the router's replay: prompt ids + resume_token_ids) on a worker that holds
// its pages reports that worker's hits on the prompt in cached_tokens, and continues the reference.
TEST_F(PrefixCacheTest, ResumedStreamReportsTheHitsOfItsReadmission) {
  const std::vector<uint32_t> prompt = Prompt(40, 9);  // 2 full pages + 8 tokens
  const RunOutcome reference = Generate(*uncached_, prompt, 24);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message();
  const RunOutcome warm = Generate(*cached_, prompt, 24);  // publishes 4 full pages (64 tokens)
  ExpectSameRun(warm, reference);

  pkv::v1::WorkerGenerateRequest replay;
  *replay.mutable_request() = MakeRequest(prompt, 24);
  replay.mutable_request()->mutable_sampling()->set_ignore_eos(true);
  replay.set_migrations(1);
  // 9 resumed tokens: 49 tokens, so 3 full pages may hit (the last token is always computed);
  // of those 48 cached tokens, the 40 of the prompt are reported.
  for (int i = 0; i < 9; ++i) replay.add_resume_token_ids(reference.tokens[i]);
  auto stub = cached_->WorkerStub(0);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto reader = stub->Generate(&ctx, replay);
  std::vector<uint32_t> tokens;
  std::optional<pkv::v1::Complete> complete;
  pkv::v1::WorkerGenerateResponse resp;
  while (reader->Read(&resp)) {
    if (resp.has_chunk())
      tokens.insert(tokens.end(), resp.chunk().token_ids().begin(), resp.chunk().token_ids().end());
    if (resp.has_complete()) complete = resp.complete();
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(complete.has_value());
  EXPECT_EQ(complete->cached_tokens(), 40u);
  EXPECT_EQ(complete->prompt_tokens(), 40u);
  EXPECT_EQ(tokens, std::vector<uint32_t>(reference.tokens.begin() + 9, reference.tokens.end()));
  ExpectIdlePoolWhole(cached_);
}

TEST_F(PrefixCacheTest, TurnedOffCachesNothing) {
  const std::vector<uint32_t> prompt = Prompt(40, 3);
  const RunOutcome a = Generate(*uncached_, prompt, 4);
  const RunOutcome b = Generate(*uncached_, prompt, 4);
  ExpectSameRun(b, a);
  EXPECT_EQ(b.complete.cached_tokens(), 0u);
  EXPECT_EQ(Metric(uncached_, "pkv_prefix_cache_hits_total"), 0);
  EXPECT_EQ(Metric(uncached_, "pkv_prefix_cache_queries_total"), 0);
  EXPECT_EQ(Metric(uncached_, "pkv_prefix_cache_pages"), 0);
  ExpectIdlePoolWhole(uncached_);
}

}  // namespace
}  // namespace pkv::testing
