// The router's Generate path against in-process fake workers: relay, failover before the first
// token, ABORTED after a mid-stream loss (worker error or stall), cancellation and deadline
// propagation to the worker, validation that never reaches a worker.
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "router/generate_stream.h"
#include "tests/unit/router/fake_worker.h"
#include "tests/unit/router/router_harness.h"

namespace pkv::router::testing {
namespace {

constexpr absl::Duration kWait =
    absl::Seconds(10);  // bound for a broken build, never a speed check

TEST(RouterStreamTest, RelaysChunksInOrderThenComplete) {
  FakeWorker worker("w-relay");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 7;
    s.tokens_per_chunk = 3;
    return s;
  });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  const StreamResult r = h.Run(TokenRequest({5, 6, 7}, 21));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, worker.sent_tokens(0));
  EXPECT_EQ(r.tokens.size(), 21u);
  ASSERT_TRUE(r.complete.has_value());
  EXPECT_EQ(r.complete->worker_id(), "w-relay");
  EXPECT_EQ(r.complete->completion_tokens(), 21u);
  EXPECT_EQ(r.complete->migrations(), 0u);
  // The router assigned a request id and a seed, and the worker saw the same id.
  ASSERT_EQ(worker.requests().size(), 1u);
  const pkv::v1::GenerateRequest forwarded = worker.requests()[0].request();
  EXPECT_FALSE(forwarded.request_id().empty());
  EXPECT_EQ(forwarded.request_id(), r.complete->request_id());
  EXPECT_TRUE(forwarded.sampling().has_seed());
  EXPECT_EQ(forwarded.token_ids().ids_size(), 3);
  std::string expected_text;
  for (uint32_t id : r.tokens) expected_text += " t" + std::to_string(id);
  EXPECT_EQ(r.text, expected_text);
  EXPECT_EQ(h.MetricWhen(1, "pkv_router_requests_total", {{"code", "OK"}}), 1);
  EXPECT_EQ(h.Metric("pkv_router_time_to_first_token_seconds"), 1);
  EXPECT_EQ(h.Metric("pkv_router_placements_total", {{"reason", "least_loaded"}}), 1);
  // One first token, timed once in each stage.
  for (const char* stage : {"admit", "worker", "relay"}) {
    EXPECT_EQ(h.MetricWhen(1, "pkv_router_first_token_stage_seconds", {{"stage", stage}}), 1)
        << stage;
  }
}

TEST(RouterStreamTest, ClientRequestIdAndSeedArePassedThrough) {
  FakeWorker worker("w");
  worker.Start();
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  pkv::v1::GenerateRequest request = TokenRequest({1}, 4);
  request.set_request_id("client-id:42");
  request.mutable_sampling()->set_seed(987654321);
  const StreamResult r = h.Run(request);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.complete->request_id(), "client-id:42");
  EXPECT_EQ(worker.requests()[0].request().sampling().seed(), 987654321u);
}

// The first-tried worker refuses before Accepted with `refusal`; the request must be re-placed on
// the other worker and succeed there.
void ExpectFailoverAfter(const grpc::Status& refusal) {
  FakeWorker refusing("w-refuse"), good("w-good");
  refusing.Start();
  good.Start();
  refusing.SetScript([refusal](int) {
    FakeScript s;
    s.refuse = refusal;
    return s;
  });
  good.SetRunning(50);  // two choices with two workers: the refusing one is always tried first
  RouterHarness h(FastOptions({&refusing, &good}));
  h.Start(2);
  ASSERT_TRUE(h.WaitForHealthy(2));
  absl::SleepFor(absl::Milliseconds(150));  // let a load poll report good's 50 running
  const StreamResult r = h.Run(TokenRequest({1, 2}, 4));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.complete->worker_id(), "w-good");
  EXPECT_EQ(r.tokens, good.sent_tokens(0));
  EXPECT_EQ(refusing.generate_calls(), 1);
  EXPECT_EQ(good.generate_calls(), 1);
  EXPECT_EQ(h.Metric("pkv_router_failovers_total"), 1);
  EXPECT_EQ(h.Metric("pkv_router_placements_total", {{"reason", "failover"}}), 1);
  // Admission is timed to the first placement only; the worker stage to the attempt that
  // produced the first chunk.
  EXPECT_EQ(h.Metric("pkv_router_first_token_stage_seconds", {{"stage", "admit"}}), 1);
  EXPECT_EQ(h.Metric("pkv_router_first_token_stage_seconds", {{"stage", "worker"}}), 1);
}

TEST(RouterStreamTest, FailsOverToAnotherWorkerBeforeTheFirstToken) {
  ExpectFailoverAfter(grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining"));
}

// A worker exiting cuts the calls it had not accepted with a bare CANCELLED (gRPC's, not the
// worker's): the request never ran there and is placed elsewhere, not failed.
TEST(RouterStreamTest, CancelledBeforeAcceptedIsALostWorkerAndFailsOver) {
  ExpectFailoverAfter(grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled"));
}

TEST(RouterStreamTest, RetriesTheSameWorkerAfterResourceExhaustedOnce) {
  FakeWorker worker("w-busy");
  worker.Start();
  worker.SetScript([](int call) {
    FakeScript s;
    if (call == 0) s.refuse = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
    return s;
  });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  const StreamResult r = h.Run(TokenRequest({3}, 4));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(worker.generate_calls(), 2);
  EXPECT_EQ(r.tokens, worker.sent_tokens(1));
  EXPECT_EQ(h.Metric("pkv_router_failovers_total"), 1);
}

TEST(RouterStreamTest, GivesUpAfterMaxAttemptsWithTheLastError) {
  FakeWorker worker("w-full");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.refuse = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
    return s;
  });
  RouterOptions options = FastOptions({&worker});
  options.max_attempts = 3;
  RouterHarness h(options);
  h.Start(1);
  const StreamResult r = h.Run(TokenRequest({3}, 4));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(r.status.error_message().find("after 3 placement(s)"), std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(r.trailers.count("grpc-retry-pushback-ms"), 1u);
  EXPECT_EQ(worker.generate_calls(), 3);
}

TEST(RouterStreamTest, WorkerLostMidStreamEndsWithAbortedAndTokenCount) {
  FakeWorker worker("w-dies");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 3;
    s.end = FakeScript::End::kFail;
    return s;
  });
  RouterOptions options = FastOptions({&worker});
  options.max_migrations = 0;  // migration off: the contract is ABORTED + tokens-emitted
  RouterHarness h(options);
  h.Start(1);
  const StreamResult r = h.Run(TokenRequest({9, 9}, 10));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::ABORTED) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("after 3 tokens"), std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(r.trailers.at("tokens-emitted"), "3");
  EXPECT_EQ(r.tokens, worker.sent_tokens(0));  // the tokens before the loss still arrived
  EXPECT_FALSE(r.complete.has_value());
  EXPECT_EQ(worker.generate_calls(), 1);  // never retried once tokens were sent
  EXPECT_EQ(h.MetricWhen(1, "pkv_router_requests_total", {{"code", "ABORTED"}}), 1);
}

TEST(RouterStreamTest, MigrationReplaysPromptAndEmittedTokensOnAnotherWorker) {
  FakeWorker first("w-first"), second("w-second");
  first.Start();
  second.Start();
  first.SetScript([](int) {
    FakeScript s;
    s.chunks = 3;
    s.tokens_per_chunk = 2;
    s.end = FakeScript::End::kFail;
    return s;
  });
  second.SetRunning(50);  // the first placement goes to `first`
  RouterOptions options = FastOptions({&first, &second});
  options.max_migrations = 1;
  RouterHarness h(options);
  h.Start(2);
  absl::SleepFor(absl::Milliseconds(150));  // a load poll reports second's 50 running
  pkv::v1::GenerateRequest request = TokenRequest({}, 20);
  request.set_text("hi!");  // the replay must carry the first worker's tokenization instead
  const StreamResult r = h.Run(request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::vector<uint32_t> expected = first.sent_tokens(0);
  const std::vector<uint32_t> resumed = second.sent_tokens(0);
  ASSERT_EQ(expected.size(), 6u);
  expected.insert(expected.end(), resumed.begin(), resumed.end());
  EXPECT_EQ(r.tokens, expected);  // nothing lost, nothing duplicated
  ASSERT_TRUE(r.complete.has_value());
  EXPECT_EQ(r.complete->migrations(), 1u);
  EXPECT_EQ(r.complete->worker_id(), "w-second");
  ASSERT_EQ(second.requests().size(), 1u);
  const pkv::v1::WorkerGenerateRequest replay = second.requests()[0];
  EXPECT_EQ(replay.migrations(), 1u);
  EXPECT_EQ(
      std::vector<uint32_t>(replay.resume_token_ids().begin(), replay.resume_token_ids().end()),
      first.sent_tokens(0));
  ASSERT_TRUE(replay.request().has_token_ids());
  EXPECT_EQ(std::vector<uint32_t>(replay.request().token_ids().ids().begin(),
                                  replay.request().token_ids().ids().end()),
            std::vector<uint32_t>({'h', 'i', '!'}));
  EXPECT_EQ(replay.request().request_id(), first.requests()[0].request().request_id());
  EXPECT_EQ(replay.request().sampling().seed(), first.requests()[0].request().sampling().seed());
  EXPECT_EQ(h.Metric("pkv_router_migrations_total", {{"phase", "mid_stream"}}), 1);
  EXPECT_EQ(h.Metric("pkv_router_migrations_total", {{"phase", "before_first_token"}}), 0);
}

TEST(RouterStreamTest, SilentWorkerAfterFirstTokenIsLost) {
  FakeWorker worker("w-hangs");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 2;
    s.end = FakeScript::End::kHang;
    return s;
  });
  RouterOptions options = FastOptions({&worker});
  options.stall_timeout = absl::Milliseconds(200);
  options.max_migrations = 0;
  RouterHarness h(options);
  h.Start(1);
  const StreamResult r = h.Run(TokenRequest({1}, 10), absl::Seconds(30));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::ABORTED) << r.status.error_message();
  // Convicted by its own answers: it claims output that never arrives (progress checks).
  EXPECT_NE(r.status.error_message().find("tokens produced (2 received)"), std::string::npos)
      << r.status.error_message();
  EXPECT_GE(worker.progress_checks(), pkv::router::kMaxInconclusiveProbes);
  EXPECT_EQ(r.tokens.size(), 2u);
  EXPECT_TRUE(worker.WaitForCancelled(1, kWait));  // the router cancelled the hung call
}

TEST(RouterStreamTest, ClientCancellationReachesTheWorker) {
  FakeWorker worker("w-cancel");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 1;
    s.end = FakeScript::End::kHang;
    return s;
  });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  grpc::ClientContext ctx;
  auto reader = h.stub().Generate(&ctx, TokenRequest({4, 4}, 50));
  pkv::v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_TRUE(response.has_chunk());
  ctx.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(worker.WaitForCancelled(1, kWait));
  // The router's accounting settles: no stream left, the slot released.
  const absl::Time until = absl::Now() + kWait;
  while (h.router().live_streams() != 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(h.router().live_streams(), 0);
  EXPECT_EQ(h.MetricWhen(0, "pkv_router_inflight"), 0);
  EXPECT_EQ(h.MetricWhen(1, "pkv_router_requests_total", {{"code", "CANCELLED"}}), 1);
}

TEST(RouterStreamTest, ClientDeadlineIsPropagatedAndEndsTheWorkerCall) {
  FakeWorker worker("w-deadline");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 1;
    s.end = FakeScript::End::kHang;
    return s;
  });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  const absl::Time before = absl::Now();
  const StreamResult r = h.Run(TokenRequest({4}, 50), absl::Milliseconds(400));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_EQ(worker.deadlines().size(), 1u);
  const absl::Time worker_deadline = absl::FromChrono(worker.deadlines()[0]);
  // The worker saw a finite deadline no later than the client's (plus clock slack).
  EXPECT_LT(worker_deadline, before + absl::Milliseconds(400) + absl::Milliseconds(50));
  EXPECT_TRUE(worker.WaitForCancelled(1, kWait));
}

TEST(RouterStreamTest, InvalidRequestNeverReachesAWorker) {
  FakeWorker worker("w");
  worker.Start();
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  pkv::v1::GenerateRequest request = TokenRequest({1, 2}, 4);
  request.mutable_sampling()->set_top_p(1.5f);
  StreamResult r = h.Run(request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "sampling.top_p must be in (0, 1], got 1.5");
  r = h.Run(TokenRequest({kFakeVocab}, 4));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = h.Run(TokenRequest({1}, kFakeMaxContext));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(worker.generate_calls(), 0);
  EXPECT_EQ(h.MetricWhen(3, "pkv_router_requests_total", {{"code", "INVALID_ARGUMENT"}}), 3);
}

TEST(RouterStreamTest, SessionsStickToOneWorker) {
  FakeWorker a("w-a"), b("w-b"), c("w-c");
  a.Start();
  b.Start();
  c.Start();
  RouterHarness h(FastOptions({&a, &b, &c}));
  h.Start(3);
  for (int session = 0; session < 6; ++session) {
    pkv::v1::GenerateRequest request = TokenRequest({1}, 2);
    request.set_session_id("conversation-" + std::to_string(session));
    std::set<std::string> workers;
    for (int turn = 0; turn < 4; ++turn) {
      const StreamResult r = h.Run(request);
      ASSERT_TRUE(r.status.ok());
      workers.insert(r.complete->worker_id());
    }
    EXPECT_EQ(workers.size(), 1u) << "session " << session << " moved";
  }
  EXPECT_EQ(h.Metric("pkv_router_placements_total", {{"reason", "affinity"}}), 18);
}

}  // namespace
}  // namespace pkv::router::testing
