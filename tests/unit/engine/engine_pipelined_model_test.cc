// The pipelined engine (EngineOptions::overlap_steps) over the CPU backend and a real (tiny,
// random) model, against the serial engine, for many random workloads: concurrent requests of
// random prompts (some sharing a prefix), lengths, stop ids and seeds, in a pool small enough to
// preempt, a few of them cancelled mid-stream. The CPU backend is batch invariant, so every
// request that was not cancelled must stream the same tokens and log-probabilities both ways,
// whatever the steps' interleaving; afterwards neither engine holds a page. A feedback row fed
// the wrong sample changes tokens here and a pending token fed as a token fails the step (the
// FakeBackend's tokens do not depend on what is fed). The CPU backend's Launch runs the step at
// once, so device-order hazards are the GPU test's (cuda_backend_device_test).
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/recording_sink.h"
#include "worker/engine/engine.h"
#include "worker/model/cpu_backend.h"
#include "worker/tokenizer/tiny_tokenizer.h"
#include "worker/tokenizer/tokenizer.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/random_model.h"

namespace pkv {
namespace {

using testing::RecordingSink;

constexpr int32_t kPageSize = 16;
constexpr int32_t kPages = 24;  // 384 tokens: a third to a half of a workload at once

class EnginePipelinedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((std::filesystem::path(::testing::TempDir()) /
                            absl::StrCat("pkv_engine_pipelined_", ::getpid()))
                               .string());
    RandomModelOptions o;
    o.out_dir = *dir_;
    o.config = *ModelShapeConfig("tiny");
    o.seed = 3;
    ASSERT_TRUE(WriteRandomModel(o).ok());
    absl::StatusOr<std::string> json = BuildTinyTokenizerJson(o.config.vocab_size);
    ASSERT_TRUE(json.ok()) << json.status();
    std::FILE* f = std::fopen((*dir_ + "/tokenizer.json").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(json->data(), 1, json->size(), f);
    std::fclose(f);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::unique_ptr<Engine> NewEngine(bool overlap) {
    auto backend = LoadCpuBackend(*dir_, kPageSize, kPages);
    EXPECT_TRUE(backend.ok()) << backend.status();
    auto tokenizer = Tokenizer::FromModelDir(*dir_);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    if (!backend.ok() || !tokenizer.ok()) return nullptr;
    EngineOptions o;
    o.max_context = 256;
    o.scheduler.page_size = kPageSize;
    o.scheduler.max_batch_tokens = 64;  // prompts prefill in chunks
    o.overlap_steps = overlap;
    auto engine =
        std::make_unique<Engine>(std::move(o), *std::move(backend), *std::move(tokenizer), nullptr);
    engine->Start();
    return engine;
  }

  static std::string* dir_;
};

std::string* EnginePipelinedModelTest::dir_ = nullptr;

struct Planned {
  pkv::v1::WorkerGenerateRequest request;
  int cancel_after = -1;  // cancel once this many tokens streamed (-1: never)
};

std::vector<Planned> Workload(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> shared;
  for (int i = 0; i < 32; ++i) shared.push_back(1 + rng() % 500);
  std::vector<Planned> out;
  for (int i = 0; i < 10; ++i) {
    Planned p;
    pkv::v1::GenerateRequest* r = p.request.mutable_request();
    r->set_request_id(absl::StrCat("s", seed, "-", i));
    if (rng() % 3 == 0) {
      for (uint32_t t : shared) r->mutable_token_ids()->add_ids(t);
    }
    const int len = 4 + static_cast<int>(rng() % 60);
    for (int t = 0; t < len; ++t) r->mutable_token_ids()->add_ids(1 + rng() % 500);
    pkv::v1::SamplingParams* s = r->mutable_sampling();
    s->set_max_tokens(4 + rng() % 40);
    s->set_ignore_eos(true);
    s->set_logprobs(true);
    if (rng() % 2 == 0) {
      s->set_temperature(1.0f);
      s->set_seed(rng());
    } else {
      s->set_temperature(0.0f);
    }
    if (rng() % 3 == 0) s->add_stop_token_ids(1 + rng() % 500);
    if (rng() % 5 == 0) p.cancel_after = 1 + static_cast<int>(rng() % 4);
    out.push_back(std::move(p));
  }
  return out;
}

// Runs the workload on `engine`, all requests at once; cancels as planned.
std::vector<std::shared_ptr<RecordingSink>> RunAll(Engine& engine,
                                                   const std::vector<Planned>& work) {
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::vector<uint64_t> ids;
  for (const Planned& p : work) {
    auto sink = std::make_shared<RecordingSink>();
    absl::StatusOr<uint64_t> id = engine.Submit(p.request, absl::InfiniteFuture(), sink);
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(id.ok() ? *id : 0);
    sinks.push_back(sink);
  }
  for (size_t i = 0; i < work.size(); ++i) {
    if (work[i].cancel_after < 0) continue;
    for (int k = 0;
         k < 2000 && sinks[i]->tokens().size() < static_cast<size_t>(work[i].cancel_after); ++k) {
      absl::SleepFor(absl::Microseconds(100));
    }
    engine.Cancel(ids[i], AbortReason::kClientCancel);
  }
  for (auto& sink : sinks) EXPECT_TRUE(sink->WaitDone());
  return sinks;
}

void ExpectPoolWhole(Engine& engine) {
  EXPECT_TRUE(engine.WaitIdle(absl::Now() + absl::Seconds(10)));
  EngineLoad load;
  for (int i = 0; i < 500; ++i) {
    load = engine.GetLoad();
    if (load.running == 0 && load.waiting == 0 && load.pages_used == 0) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(load.running, 0);
  EXPECT_EQ(load.waiting, 0);
  EXPECT_EQ(load.pages_used, 0);
}

TEST_F(EnginePipelinedModelTest, RandomWorkloadsStreamWhatTheSerialEngineStreams) {
  std::unique_ptr<Engine> serial = NewEngine(false);
  std::unique_ptr<Engine> pipelined = NewEngine(true);
  ASSERT_NE(serial, nullptr);
  ASSERT_NE(pipelined, nullptr);
  int compared = 0, stopped = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(absl::StrCat("workload seed ", seed));
    const std::vector<Planned> work = Workload(seed);
    const auto want = RunAll(*serial, work);
    const auto got = RunAll(*pipelined, work);
    for (size_t i = 0; i < work.size(); ++i) {
      if (work[i].cancel_after >= 0) {  // ends CANCELLED or, if quicker than the cancel, whole
        EXPECT_TRUE(got[i]->error().ok() || got[i]->error().code() == absl::StatusCode::kCancelled)
            << got[i]->error();
        continue;
      }
      SCOPED_TRACE(absl::StrCat("request ", i));
      ASSERT_TRUE(want[i]->error().ok()) << want[i]->error();
      ASSERT_TRUE(got[i]->error().ok()) << got[i]->error();
      EXPECT_EQ(got[i]->tokens(), want[i]->tokens());
      EXPECT_EQ(got[i]->complete().finish_reason(), want[i]->complete().finish_reason());
      const std::vector<float> a = got[i]->logprobs(), b = want[i]->logprobs();
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5) << "logprob " << k;
      ++compared;
      stopped += got[i]->complete().finish_reason() == pkv::v1::FINISH_REASON_STOP;
    }
    ExpectPoolWhole(*serial);
    ExpectPoolWhole(*pipelined);
  }
  EXPECT_GE(compared, 40);
  EXPECT_GE(stopped, 1) << "some stop id must end a request early";
}

}  // namespace
}  // namespace pkv
