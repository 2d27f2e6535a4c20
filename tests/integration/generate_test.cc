// End-to-end through real processes: pkv-router in front of two pkv-worker processes on the CPU
// backend with the tiny model, over loopback gRPC (issue 2's acceptance tests).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "worker/model/cpu_backend.h"

namespace pkv::testing {
namespace {

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.num_workers = 2;
    auto c = Cluster::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    stub_ = cluster_->RouterStub();
  }

  // Greedy decoding of the same model in this process: the oracle for the served stream.
  static std::vector<uint32_t> GreedyInProcess(const std::vector<uint32_t>& prompt, int n) {
    auto backend = LoadCpuBackend(cluster_->model_dir(), 16, 256);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return {};
    std::vector<int32_t> tokens(prompt.begin(), prompt.end());
    std::vector<int32_t> pages(64);
    for (int i = 0; i < 64; ++i) pages[i] = 63 - i;  // non-contiguous on purpose
    SamplingParams params;
    params.temperature = 0.0f;
    std::vector<uint32_t> out;
    int32_t computed = 0;
    for (int i = 0; i < n; ++i) {
      BatchRow row;
      row.tokens = tokens.data() + computed;
      row.num_tokens = static_cast<int32_t>(tokens.size()) - computed;
      row.start_pos = computed;
      row.pages = pages.data();
      row.num_pages = 64;
      row.sample = true;
      row.params = &params;
      row.sample_index = i;
      std::vector<SampleResult> samples;
      StepStats stats;
      EXPECT_TRUE((*backend)->Step({&row, 1}, &samples, &stats).ok());
      computed = static_cast<int32_t>(tokens.size());
      tokens.push_back(samples.at(0).token_id);
      out.push_back(static_cast<uint32_t>(samples[0].token_id));
    }
    return out;
  }

  static Cluster* cluster_;
  std::unique_ptr<pkv::v1::Generation::Stub> stub_;
};

Cluster* GenerateTest::cluster_ = nullptr;

TEST_F(GenerateTest, GreedyStreamEqualsInProcessModel) {
  const std::vector<uint32_t> prompt = {5, 17, 300, 42, 99, 7, 123, 256, 8};
  pkv::v1::GenerateRequest req = MakeRequest(prompt, 40);
  req.mutable_sampling()->set_ignore_eos(true);
  StreamResult r = RunGenerate(stub_.get(), req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << cluster_->Logs();
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.complete.finish_reason(), pkv::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.complete.completion_tokens(), 40u);
  EXPECT_EQ(r.complete.prompt_tokens(), prompt.size());
  EXPECT_EQ(r.token_ids, GreedyInProcess(prompt, 40));
  EXPECT_GE(r.num_chunks, 2) << "tokens must stream, not arrive in one message";
}

TEST_F(GenerateTest, SeedMakesSamplingReproducible) {
  auto sample = [&](uint64_t seed) {
    pkv::v1::GenerateRequest req;
    req.set_text("The quick brown fox");
    req.mutable_sampling()->set_max_tokens(32);
    req.mutable_sampling()->set_temperature(1.0f);
    req.mutable_sampling()->set_seed(seed);
    req.mutable_sampling()->set_ignore_eos(true);
    StreamResult r = RunGenerate(stub_.get(), req);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    return r.token_ids;
  };
  const auto a = sample(1234);
  const auto b = sample(1234);
  const auto c = sample(98765);
  ASSERT_EQ(a.size(), 32u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(GenerateTest, TextPromptStreamsText) {
  pkv::v1::GenerateRequest req;
  req.set_text("Hello, world! Once upon a time");
  req.mutable_sampling()->set_max_tokens(24);
  req.mutable_sampling()->set_temperature(0.7f);
  req.mutable_sampling()->set_seed(7);
  req.mutable_sampling()->set_ignore_eos(true);
  StreamResult r = RunGenerate(stub_.get(), req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.token_ids.size(), 24u);
  EXPECT_FALSE(r.text.empty());
  EXPECT_GT(r.complete.prompt_tokens(), 0u);
}

TEST_F(GenerateTest, ThirtyTwoConcurrentStreamsComplete) {
  constexpr int kStreams = 32;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto stub = cluster_->RouterStub();
      pkv::v1::GenerateRequest req =
          MakeRequest({static_cast<uint32_t>(10 + i), 20, 30, static_cast<uint32_t>(i)}, 24);
      req.mutable_sampling()->set_ignore_eos(true);
      req.set_session_id(absl::StrCat("session-", i % 8));
      results[i] = RunGenerate(stub.get(), req);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(results[i].token_ids.size(), 24u) << i;
  }
}

TEST_F(GenerateTest, CancelledStreamFreesItsPages) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  pkv::v1::GenerateRequest req = MakeRequest({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 900);
  req.mutable_sampling()->set_ignore_eos(true);
  auto reader = stub_->Generate(&ctx, req);
  pkv::v1::GenerateResponse resp;
  int chunks = 0;
  while (chunks < 5 && reader->Read(&resp)) {
    if (resp.has_chunk()) ++chunks;
  }
  ASSERT_EQ(chunks, 5);
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Within a few steps every worker reports zero used pages and no sequences.
  for (int w = 0; w < cluster_->num_workers(); ++w) {
    auto stub = cluster_->WorkerStub(w);
    pkv::v1::Load load;
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    do {
      grpc::ClientContext lctx;
      lctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      ASSERT_TRUE(stub->GetLoad(&lctx, {}, &load).ok());
      if (load.kv_pages_used() == 0 && load.running() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (absl::Now() < deadline);
    EXPECT_EQ(load.kv_pages_used(), 0u) << "worker " << w;
    EXPECT_EQ(load.running() + load.waiting(), 0u) << "worker " << w;
    const double allocs = ScrapeMetric(cluster_->worker(w).metrics_address(), "pkv_kv_page_allocs");
    const double frees = ScrapeMetric(cluster_->worker(w).metrics_address(), "pkv_kv_page_frees");
    EXPECT_EQ(allocs, frees) << "page ledger of worker " << w;
  }
}

struct BadCase {
  const char* name;
  std::function<void(pkv::v1::GenerateRequest*)> mutate;
  const char* message_part;
};

TEST_F(GenerateTest, InvalidRequestsGetInvalidArgumentAndServersStayUp) {
  const std::vector<BadCase> cases = {
      {"unknown token id", [](auto* r) { r->mutable_token_ids()->add_ids(512); }, "512"},
      {"max_tokens 0", [](auto* r) { r->mutable_sampling()->set_max_tokens(0); }, "max_tokens"},
      {"prompt longer than the context",
       [](auto* r) {
         for (int i = 0; i < 1100; ++i) r->mutable_token_ids()->add_ids(3);
       },
       "context"},
      {"top_p 1.5", [](auto* r) { r->mutable_sampling()->set_top_p(1.5f); }, "top_p"},
      {"temperature NaN", [](auto* r) { r->mutable_sampling()->set_temperature(std::nanf("")); },
       "temperature"},
      {"empty prompt", [](auto* r) { r->mutable_token_ids()->clear_ids(); }, "empty"},
  };
  for (const BadCase& c : cases) {
    pkv::v1::GenerateRequest req = MakeRequest({1, 2, 3}, 8);
    c.mutate(&req);
    StreamResult r = RunGenerate(stub_.get(), req, absl::Seconds(10));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_NE(r.status.error_message().find(c.message_part), std::string::npos)
        << c.name << ": " << r.status.error_message();
    EXPECT_TRUE(r.token_ids.empty()) << c.name;
  }
  EXPECT_TRUE(cluster_->router().Running());
  for (int w = 0; w < cluster_->num_workers(); ++w) {
    EXPECT_TRUE(cluster_->worker(w).process->Running());
  }
  StreamResult ok = RunGenerate(stub_.get(), MakeRequest({1, 2, 3}, 4));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
}

// A context limit past the model's positions is refused at start with a message that names the
// limit and the fix, rather than accepted and failed on the first long batch (RELIABILITY V4).
TEST(WorkerStartTest, RefusesMaxModelLenPastTheModelsPositions) {
  const absl::StatusOr<std::string> tail =
      RefusedWorkerStartLog({"--max_model_len=16384"}, absl::Seconds(120));
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_NE(tail->find("--max_model_len=16384 is past the model's max_position_embeddings"),
            std::string::npos)
      << *tail;
}

}  // namespace
}  // namespace pkv::testing
