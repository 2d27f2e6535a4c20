// Tensor parallelism through real processes: a pkv-worker --tp 2 (CPU backend, two in-process
// ranks) behind a pkv-router serves the same greedy streams as a --tp 1 worker behind another
// router, alone and with concurrent streams batched together; a split the model does not allow
// (--tp 4 on the tiny model's 2 KV heads) stops the worker at start-up with a clear message.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"

namespace pkv::testing {
namespace {

class TpWorkerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tp1_ = StartOne({"--backend=cpu"});
    tp2_ = StartOne({"--backend=cpu", "--tp=2"});
  }
  static void TearDownTestSuite() {
    delete tp1_;
    delete tp2_;
    tp1_ = tp2_ = nullptr;
  }
  static Cluster* StartOne(std::vector<std::string> worker_args) {
    ClusterOptions options;
    options.num_workers = 1;
    options.worker_args = std::move(worker_args);
    auto c = Cluster::Start(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->release() : nullptr;
  }
  void SetUp() override {
    ASSERT_NE(tp1_, nullptr);
    ASSERT_NE(tp2_, nullptr);
  }

  static StreamResult Generate(Cluster* c, const pkv::v1::GenerateRequest& req) {
    auto stub = c->RouterStub();
    return RunGenerate(stub.get(), req);
  }

  static Cluster* tp1_;
  static Cluster* tp2_;
};

Cluster* TpWorkerTest::tp1_ = nullptr;
Cluster* TpWorkerTest::tp2_ = nullptr;

std::vector<uint32_t> Prompt(int i) {
  std::vector<uint32_t> p;
  for (int k = 0; k < 5 + 3 * i; ++k) p.push_back(static_cast<uint32_t>((37 * i + 11 * k) % 500));
  return p;
}

TEST_F(TpWorkerTest, GreedyStreamEqualsTpOneWorker) {
  for (int i = 0; i < 3; ++i) {
    pkv::v1::GenerateRequest req = MakeRequest(Prompt(i), 40);
    req.mutable_sampling()->set_ignore_eos(true);
    const StreamResult want = Generate(tp1_, req);
    const StreamResult got = Generate(tp2_, req);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message() << "\n" << tp1_->Logs();
    ASSERT_TRUE(got.status.ok()) << got.status.error_message() << "\n" << tp2_->Logs();
    ASSERT_EQ(want.token_ids.size(), 40u);
    EXPECT_EQ(got.token_ids, want.token_ids) << "prompt " << i;
    EXPECT_EQ(got.complete.completion_tokens(), 40u);
  }
  EXPECT_TRUE(absl::StrContains(tp2_->worker(0).process->LogTail(20000), "tensor parallel 2"))
      << tp2_->Logs();
}

TEST_F(TpWorkerTest, SeededSamplingEqualsTpOneWorker) {
  pkv::v1::GenerateRequest req = MakeRequest(Prompt(4), 32, /*temperature=*/0.9f);
  req.mutable_sampling()->set_seed(424242);
  req.mutable_sampling()->set_top_k(50);
  req.mutable_sampling()->set_ignore_eos(true);
  const StreamResult want = Generate(tp1_, req);
  const StreamResult got = Generate(tp2_, req);
  ASSERT_TRUE(want.status.ok() && got.status.ok());
  EXPECT_EQ(got.token_ids, want.token_ids);
}

// Streams that overlap are batched into the same steps (rows of different lengths, chunked
// prefill next to decode), which the ranks must shard identically.
TEST_F(TpWorkerTest, ConcurrentStreamsEqualSequentialTpOne) {
  constexpr int kStreams = 8;
  std::vector<pkv::v1::GenerateRequest> reqs;
  std::vector<StreamResult> want(kStreams), got(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    reqs.push_back(MakeRequest(Prompt(i + 5), 24));
    reqs.back().mutable_sampling()->set_ignore_eos(true);
    want[i] = Generate(tp1_, reqs[i]);
    ASSERT_TRUE(want[i].status.ok()) << want[i].status.error_message();
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] { got[i] = Generate(tp2_, reqs[i]); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(got[i].status.ok()) << i << ": " << got[i].status.error_message();
    EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "stream " << i;
  }
}

TEST(TpWorkerStartupTest, SplitTheModelDoesNotAllowIsRefusedAtStartup) {
  const std::string log = MakeTempDir("pkv-tp4") + "/worker.log";
  auto p = Process::Spawn(
      BinDir() + "/pkv-worker",
      {absl::StrCat("--listen=127.0.0.1:", PickFreePort()),
       absl::StrCat("--metrics_listen=127.0.0.1:", PickFreePort()),
       absl::StrCat("--model=", TinyModelDir()), "--backend=cpu", "--tp=4", "--insecure"},
      log);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::optional<int> code = (*p)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << "the worker kept running:\n" << (*p)->LogTail();
  EXPECT_EQ(*code, 1);
  const std::string tail = (*p)->LogTail();
  EXPECT_TRUE(absl::StrContains(tail, "--tp 4 does not divide num_key_value_heads 2")) << tail;
  EXPECT_TRUE(absl::StrContains(tail, "valid --tp for this model: 1, 2")) << tail;
}

}  // namespace
}  // namespace pkv::testing
