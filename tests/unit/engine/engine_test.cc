// The engine over a scripted backend (fake_backend.h) and a byte-level tokenizer: one step's
// schedule -> prepare -> run -> postprocess seen from a request's sink, and a backend failure
// (through FaultInjectingBackend, the worker's own wrapper) failing every request.
#include "worker/engine/engine.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/fake_backend.h"
#include "tests/unit/engine/recording_sink.h"
#include "tests/unit/tokenizer/test_util.h"
#include "worker/engine/fault_injecting_backend.h"

namespace pkv {
namespace {

using testing::FakeBackend;
using testing::RecordingSink;

constexpr int32_t kFirstToken = 'a';  // the fake backend samples 'a', 'b', 'c', ...
constexpr int32_t kEos = '!';

pkv::v1::WorkerGenerateRequest Request(const std::string& id, int32_t max_tokens) {
  pkv::v1::WorkerGenerateRequest w;
  pkv::v1::GenerateRequest* r = w.mutable_request();
  r->set_request_id(id);
  for (uint32_t t : {'h', 'e', 'l', 'l', 'o'}) r->mutable_token_ids()->add_ids(t);
  r->mutable_sampling()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  r->mutable_sampling()->set_temperature(0);
  return w;
}

struct EngineUnderTest {
  // `faults`: wrap the fake backend as the worker does when --test_fault is set. `overlap`:
  // EngineOptions::overlap_steps.
  explicit EngineUnderTest(const TestFaults& faults = {}, bool overlap = false) {
    auto fake = std::make_unique<FakeBackend>(kFirstToken, std::vector<int32_t>{kEos});
    backend = fake.get();
    std::unique_ptr<ModelBackend> installed = std::move(fake);
    if (faults.any()) {
      installed = std::make_unique<FaultInjectingBackend>(std::move(installed), faults);
    }
    EngineOptions o;
    o.max_context = 64;
    o.scheduler.page_size = 4;
    o.overlap_steps = overlap;
    o.on_fatal = [this](absl::Status st) { fatal.Notify(); };
    engine = std::make_unique<Engine>(std::move(o), std::move(installed),
                                      testing::MakeTokenizer(testing::TokenizerSpec{}), nullptr);
    engine->Start();
  }
  std::shared_ptr<RecordingSink> Submit(const pkv::v1::WorkerGenerateRequest& request) {
    auto sink = std::make_shared<RecordingSink>();
    absl::StatusOr<uint64_t> id = engine->Submit(request, absl::InfiniteFuture(), sink);
    EXPECT_TRUE(id.ok()) << id.status();
    return sink;
  }
  FakeBackend* backend;  // owned by the engine
  absl::Notification fatal;
  std::unique_ptr<Engine> engine;
};

// Every behaviour below holds with steps pipelined (overlap_steps) and without.
class EngineStepTest : public ::testing::TestWithParam<bool> {
 protected:
  bool overlap() const { return GetParam(); }
};

TEST_P(EngineStepTest, StreamsEachSampledTokenAndFinishesAtMaxTokens) {
  EngineUnderTest t({}, overlap());
  std::shared_ptr<RecordingSink> sink = t.Submit(Request("r1", 4));
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->error().ok()) << sink->error();
  EXPECT_EQ(sink->accepted(), (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(sink->tokens(), (std::vector<int32_t>{'a', 'b', 'c', 'd'}));
  EXPECT_EQ(sink->text(), "abcd");
  const pkv::v1::Complete c = sink->complete();
  EXPECT_EQ(c.finish_reason(), pkv::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(c.prompt_tokens(), 5u);
  EXPECT_EQ(c.completion_tokens(), 4u);
  EXPECT_EQ(c.request_id(), "r1");
  EXPECT_TRUE(t.engine->WaitIdle(absl::Now() + absl::Seconds(10)));
  // One prefill step, then one decode step per further token; each row names its sequence.
  ASSERT_EQ(t.backend->steps.size(), 4u);
  EXPECT_EQ(t.backend->steps[0][0].start_pos, 0);
  EXPECT_EQ(t.backend->steps[0][0].num_tokens, 5);
  EXPECT_EQ(t.backend->steps[3][0].start_pos, 7);
  for (const auto& step : t.backend->steps) EXPECT_EQ(step[0].sequence_id, 1u);
  // Each decode row feeds the token the step before sampled (a feedback row when pipelined: the
  // engine launched it before it knew that token). The 4th token ends the request: nothing more
  // is launched, pipelined or not.
  for (size_t s = 1; s < t.backend->steps.size(); ++s) {
    EXPECT_EQ(t.backend->steps[s][0].first_token, kFirstToken + static_cast<int32_t>(s) - 1);
  }
}

TEST_P(EngineStepTest, AStopTokenIdEndsTheRequestWithoutBeingEmitted) {
  EngineUnderTest t({}, overlap());
  pkv::v1::WorkerGenerateRequest r = Request("r1", 10);
  r.mutable_request()->mutable_sampling()->add_stop_token_ids('c');
  std::shared_ptr<RecordingSink> sink = t.Submit(r);
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->tokens(), (std::vector<int32_t>{'a', 'b'}));
  EXPECT_EQ(sink->complete().finish_reason(), pkv::v1::FINISH_REASON_STOP);
  EXPECT_EQ(sink->complete().matched_stop(), "99");  // 'c'
  EXPECT_EQ(sink->complete().completion_tokens(), 2u);
  EXPECT_TRUE(t.engine->WaitIdle(absl::Now() + absl::Seconds(10)));
  // Pipelined, the step after the one that sampled 'c' was launched before 'c' was seen: one
  // decode computed in vain, its sample dropped.
  EXPECT_EQ(t.backend->steps.size(), overlap() ? 4u : 3u);
}

TEST_P(EngineStepTest, TwoRequestsShareStepsAsDistinctSequences) {
  EngineUnderTest t({}, overlap());
  std::shared_ptr<RecordingSink> a = t.Submit(Request("a", 3));
  std::shared_ptr<RecordingSink> b = t.Submit(Request("b", 3));
  ASSERT_TRUE(a->WaitDone());
  ASSERT_TRUE(b->WaitDone());
  EXPECT_EQ(a->text(), "abc");
  EXPECT_EQ(b->text(), "abc");
  EXPECT_TRUE(t.engine->WaitIdle(absl::Now() + absl::Seconds(10)));
  std::vector<uint64_t> ids;
  for (const auto& step : t.backend->steps) {
    for (const FakeBackend::SeenRow& row : step) ids.push_back(row.sequence_id);
  }
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1u), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2u), 3);
}

// The pool is whole again: nothing running and every page free (the load is published after the
// loop's step, so it is polled).
void ExpectPoolWhole(Engine& engine) {
  EngineLoad load;
  for (int i = 0; i < 500; ++i) {
    load = engine.GetLoad();
    if (load.running == 0 && load.pages_used == 0) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(load.running, 0);
  EXPECT_EQ(load.pages_used, 0);
}

// Eight requests that need 360 KV tokens of a 256-token pool: sequences are preempted (their
// pages taken back, pipelined or not, while a step that feeds them may be running) and
// recomputed; every request still streams exactly its tokens, and no page is lost.
TEST_P(EngineStepTest, PreemptedSequencesStreamTheirTokensAndThePoolIsWhole) {
  TestFaults slow;  // steps of 5 ms: all eight are in long before the first finishes
  slow.slow_step_ms = 5;
  EngineUnderTest t(slow, overlap());
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 8; ++i) sinks.push_back(t.Submit(Request(absl::StrCat("r", i), 40)));
  std::vector<int32_t> want;
  for (int32_t i = 0; i < 40; ++i) want.push_back(kFirstToken + i);
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitDone());
    ASSERT_TRUE(sink->error().ok()) << sink->error();
    EXPECT_EQ(sink->tokens(), want);
  }
  EXPECT_TRUE(t.engine->WaitIdle(absl::Now() + absl::Seconds(10)));
  // A sequence fed again from an earlier position than its last row's shows a preemption.
  int recomputes = 0;
  absl::flat_hash_map<uint64_t, int32_t> last_start;
  for (const auto& step : t.backend->steps) {
    for (const FakeBackend::SeenRow& row : step) {
      auto [it, fresh] = last_start.try_emplace(row.sequence_id, row.start_pos);
      if (!fresh && row.start_pos < it->second) ++recomputes;
      it->second = row.start_pos;
    }
  }
  EXPECT_GT(recomputes, 0);
  ExpectPoolWhole(*t.engine);
}

// A cancel lands while the request's steps run (pipelined: one is always launched ahead); the
// request ends CANCELLED within a step or two and its pages come back.
TEST_P(EngineStepTest, ACancelledStreamEndsAndReturnsItsPages) {
  TestFaults slow;  // 50 steps of 20 ms: the cancel lands long before the last
  slow.slow_step_ms = 20;
  EngineUnderTest t(slow, overlap());
  auto sink = std::make_shared<RecordingSink>();
  absl::StatusOr<uint64_t> id = t.engine->Submit(Request("r1", 50), absl::InfiniteFuture(), sink);
  ASSERT_TRUE(id.ok()) << id.status();
  for (int i = 0; i < 1000 && sink->tokens().size() < 3; ++i) absl::SleepFor(absl::Milliseconds(2));
  t.engine->Cancel(*id, AbortReason::kClientCancel);
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->error().code(), absl::StatusCode::kCancelled) << sink->error();
  EXPECT_LT(sink->tokens().size(), 50u);
  EXPECT_TRUE(t.engine->WaitIdle(absl::Now() + absl::Seconds(10)));
  ExpectPoolWhole(*t.engine);
}

INSTANTIATE_TEST_SUITE_P(Overlap, EngineStepTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Pipelined" : "Serial"; });

// Runs one request under `faults` and expects the backend's failure to fail it and the engine.
std::shared_ptr<RecordingSink> FailedRequest(EngineUnderTest& t, const std::string& cause) {
  std::shared_ptr<RecordingSink> sink = t.Submit(Request("r1", 10));
  EXPECT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->error().code(), absl::StatusCode::kInternal);
  EXPECT_NE(sink->error().message().find("backend failure: test fault: " + cause),
            std::string::npos)
      << sink->error();
  EXPECT_TRUE(t.fatal.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(t.engine->failed());
  return sink;
}

TEST(EngineTest, AFailedForwardStepFailsEveryRequestAndTheEngine) {
  TestFaults faults;
  faults.fail_forward_after = 1;
  EngineUnderTest t(faults);
  std::shared_ptr<RecordingSink> sink = FailedRequest(t, "forward pass failed");
  EXPECT_EQ(sink->tokens(), (std::vector<int32_t>{'a'}));  // from the one good step
  auto later = std::make_shared<RecordingSink>();
  EXPECT_EQ(t.engine->Submit(Request("r2", 2), absl::InfiniteFuture(), later).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(EngineTest, AKvAllocationFaultFailsTheRequestsInFlight) {
  TestFaults faults;
  faults.fail_kv_alloc_after = 0;
  EngineUnderTest t(faults);
  EXPECT_TRUE(FailedRequest(t, "KV page allocation failed")->tokens().empty());
}

}  // namespace
}  // namespace pkv
