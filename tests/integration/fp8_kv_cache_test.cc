// FP8 KV cache end to end (issue 16): a router in front of one CPU worker with
// --kv_cache_dtype=fp8_e4m3 and, as the reference, one with float KV (auto). The FP8 worker must
// report its KV dtype (ModelInfo through the router, `pkv info`, pkv_kv_cache_info), hold four
// times the pages of the auto worker in the same default memory budget, serve greedy requests
// whose log-probabilities stay close to the float-KV worker's, hit its prefix cache with the same
// outputs as a cold run, and leave the pool whole at idle.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

struct RunOutcome {
  grpc::Status status;
  std::vector<uint32_t> tokens;
  std::vector<float> logprobs;  // of each generated token
  pkv::v1::Complete complete;
};

RunOutcome Generate(const Cluster& cluster, const std::vector<uint32_t>& prompt,
                    uint32_t max_tokens) {
  pkv::v1::GenerateRequest req = MakeRequest(prompt, max_tokens);
  req.mutable_sampling()->set_ignore_eos(true);
  req.mutable_sampling()->set_logprobs(true);
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
      for (const auto& lp : resp.chunk().logprobs()) run.logprobs.push_back(lp.logprob());
    } else if (resp.has_complete()) {
      run.complete = resp.complete();
    }
  }
  run.status = reader->Finish();
  return run;
}

std::vector<uint32_t> Prompt(int n, int seed) {
  std::vector<uint32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<uint32_t>((i * 53 + seed * 97 + 5) % 500));
  return p;
}

class Fp8KvCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions fp8;
    fp8.num_workers = 1;
    fp8.worker_args = {"--backend=cpu", "--kv_cache_dtype=fp8_e4m3"};
    auto a = Cluster::Start(fp8);
    ASSERT_TRUE(a.ok()) << a.status();
    fp8_ = a->release();
    ClusterOptions f32 = fp8;
    f32.worker_args = {"--backend=cpu"};
    auto b = Cluster::Start(f32);
    ASSERT_TRUE(b.ok()) << b.status();
    f32_ = b->release();
  }
  static void TearDownTestSuite() {
    delete fp8_;
    delete f32_;
    fp8_ = f32_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(fp8_, nullptr);
    ASSERT_NE(f32_, nullptr);
  }
  static pkv::v1::ModelInfo RouterModelInfo(Cluster* c) {
    pkv::v1::ModelInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    ctx.set_wait_for_ready(true);
    const grpc::Status s = c->RouterStub()->GetModelInfo(&ctx, {}, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }
  static pkv::v1::ModelInfo WorkerModelInfo(Cluster* c) {
    pkv::v1::ModelInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status s = c->WorkerStub(0)->GetModelInfo(&ctx, {}, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }
  // The worker runs nothing, holds no page, and its page ledger balances.
  static void ExpectIdlePoolWhole(Cluster* c) {
    const absl::Status quiescent = WaitWorkerQuiescent(c->worker(0), absl::Seconds(5));
    EXPECT_TRUE(quiescent.ok()) << quiescent;
  }

  static Cluster* fp8_;
  static Cluster* f32_;
};

Cluster* Fp8KvCacheTest::fp8_ = nullptr;
Cluster* Fp8KvCacheTest::f32_ = nullptr;

TEST_F(Fp8KvCacheTest, ReportsItsKvDtypeAndHoldsFourTimesThePages) {
  const pkv::v1::ModelInfo fp8 = WorkerModelInfo(fp8_), f32 = WorkerModelInfo(f32_);
  EXPECT_EQ(fp8.kv_cache_dtype(), "fp8_e4m3");
  EXPECT_EQ(fp8.dtype(), "float32") << "activations stay float32";
  EXPECT_EQ(f32.kv_cache_dtype(), "auto");
  EXPECT_EQ(RouterModelInfo(fp8_).kv_cache_dtype(), "fp8_e4m3");
  // The default CPU pool is a byte budget: 1-byte pages fit 4x the 4-byte ones.
  EXPECT_EQ(fp8.kv_pages_total(), 4 * f32.kv_pages_total());
  EXPECT_EQ(
      ScrapeMetric(fp8_->worker(0).metrics_address(), "pkv_kv_cache_info{dtype=\"fp8_e4m3\"}"), 1);
  EXPECT_EQ(ScrapeMetric(f32_->worker(0).metrics_address(), "pkv_kv_cache_info{dtype=\"auto\"}"),
            1);

  const std::string log = MakeTempDir("pkv-fp8-info") + "/info.log";
  auto p = Process::Spawn(BinDir() + "/pkv", {"info", "--addr=" + fp8_->router_address()}, log);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::optional<int> code = (*p)->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << (*p)->LogTail();
  EXPECT_TRUE(absl::StrContains((*p)->LogTail(), "kv_cache_dtype: fp8_e4m3")) << (*p)->LogTail();
}

// Drift against float KV over 4 greedy prompts. Each generated token's log-probability is
// compared while the two workers' tokens agree (after a divergence the contexts differ). Bound:
// 0.1 nats on the tiny model (E4M3 keeps 3 mantissa bits; measured: 0.0026 nats), and the first
// token of every prompt must agree (its context is the same prompt for both). A drift of exactly 0
// would mean the worker did not quantize.
TEST_F(Fp8KvCacheTest, GreedyLogprobsStayCloseToFloatKv) {
  double max_drift = 0;
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(absl::StrCat("prompt ", i));
    const std::vector<uint32_t> prompt = Prompt(20 + 9 * i, i + 1);
    const RunOutcome want = Generate(*f32_, prompt, 12);
    const RunOutcome got = Generate(*fp8_, prompt, 12);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message() << f32_->Logs();
    ASSERT_TRUE(got.status.ok()) << got.status.error_message() << fp8_->Logs();
    ASSERT_EQ(got.tokens.size(), 12u);
    ASSERT_EQ(got.logprobs.size(), 12u);
    ASSERT_EQ(want.logprobs.size(), 12u);
    EXPECT_EQ(got.tokens[0], want.tokens[0]);
    for (size_t t = 0; t < got.tokens.size() && got.tokens[t] == want.tokens[t]; ++t) {
      max_drift = std::max(max_drift, std::abs(double{got.logprobs[t]} - want.logprobs[t]));
    }
  }
  EXPECT_LE(max_drift, 0.1);
  EXPECT_GT(max_drift, 0.0) << "FP8 KV gave float KV's log-probabilities exactly";
  std::printf("fp8_e4m3 vs float KV: max |logprob drift| = %.5f nats\n", max_drift);
}

// The prefix cache composes with FP8 pages: a repeated prompt hits 2 full pages and gives exactly
// the cold run's tokens and log-probabilities (the shared pages hold the same codes).
TEST_F(Fp8KvCacheTest, PrefixCacheHitsMatchTheColdRun) {
  const std::vector<uint32_t> prompt = Prompt(40, 9);  // 2 full pages of 16 + 8 tokens
  const std::string m = fp8_->worker(0).metrics_address();
  const double hits_before = ScrapeMetric(m, "pkv_prefix_cache_hits_total");
  const RunOutcome cold = Generate(*fp8_, prompt, 10);
  const RunOutcome warm = Generate(*fp8_, prompt, 10);
  ASSERT_TRUE(cold.status.ok()) << cold.status.error_message();
  ASSERT_TRUE(warm.status.ok()) << warm.status.error_message();
  EXPECT_EQ(cold.complete.cached_tokens(), 0u);
  EXPECT_EQ(warm.complete.cached_tokens(), 32u);
  EXPECT_EQ(warm.tokens, cold.tokens);
  ASSERT_EQ(warm.logprobs.size(), cold.logprobs.size());
  for (size_t i = 0; i < warm.logprobs.size(); ++i) {
    EXPECT_NEAR(warm.logprobs[i], cold.logprobs[i], 1e-5) << "logprob " << i;
  }
  EXPECT_EQ(ScrapeMetric(m, "pkv_prefix_cache_hits_total") - hits_before, 32);
  ExpectIdlePoolWhole(fp8_);
  ExpectIdlePoolWhole(f32_);
}

// Tensor parallelism with FP8 KV: a --tp 2 worker gives the --tp 1 FP8 worker's greedy tokens.
TEST_F(Fp8KvCacheTest, TensorParallelWorkerMatchesTheSingleRankOne) {
  ClusterOptions tp;
  tp.num_workers = 1;
  tp.worker_args = {"--backend=cpu", "--tp=2", "--kv_cache_dtype=fp8_e4m3"};
  auto c = Cluster::Start(tp);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(WorkerModelInfo(c->get()).kv_cache_dtype(), "fp8_e4m3");
  const std::vector<uint32_t> prompt = Prompt(37, 4);
  const RunOutcome want = Generate(*fp8_, prompt, 12);
  const RunOutcome got = Generate(**c, prompt, 12);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message() << (*c)->Logs();
  EXPECT_EQ(got.tokens, want.tokens);
  ExpectIdlePoolWhole(c->get());
}

TEST(Fp8KvCacheStartupTest, UnknownKvCacheDtypeIsRefusedNamingTheFlag) {
  const absl::StatusOr<std::string> tail =
      RefusedWorkerStartLog({"--kv_cache_dtype=fp8"}, absl::Seconds(60));
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_TRUE(absl::StrContains(*tail, "--kv_cache_dtype")) << *tail;
  EXPECT_TRUE(absl::StrContains(*tail, "fp8_e4m3, fp8_e5m2")) << *tail;
}

}  // namespace
}  // namespace pkv::testing
