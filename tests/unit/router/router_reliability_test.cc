// The router's reliability paths against in-process fake workers: the migration bound and
// replay re-placement, immediate ejection of a lost worker and its half-open re-admission,
// deadlines shorter than the admission queue wait, the queued-token bound, health service names,
// and DNS membership changes (SetDiscovered) while a stream runs on a removed worker.
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/unit/router/fake_worker.h"
#include "tests/unit/router/router_harness.h"

namespace pkv::router::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);  // bound for a broken build, not a speed check

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout = kWait) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

FakeScript DiesAfter(int chunks) {
  FakeScript s;
  s.chunks = chunks;
  s.tokens_per_chunk = 1;
  s.end = FakeScript::End::kFail;
  return s;
}

// Every worker dies mid-stream: the stream moves max_migrations times, then ends ABORTED with
// every token it got exactly once.
TEST(RouterReliabilityTest, MigrationsAreBoundedThenAborted) {
  FakeWorker a("a"), b("b"), c("c");
  for (FakeWorker* w : {&a, &b, &c}) {
    w->Start();
    w->SetScript([](int) { return DiesAfter(2); });
  }
  RouterOptions options = FastOptions({&a, &b, &c});
  options.max_migrations = 2;
  RouterHarness h(options);
  h.Start(3);
  const StreamResult r = h.Run(TokenRequest({4, 5, 6}, 50));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::ABORTED) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(r.trailers.at("tokens-emitted"), "6");
  EXPECT_EQ(a.generate_calls() + b.generate_calls() + c.generate_calls(), 3);
  EXPECT_EQ(h.Metric("pkv_router_migrations_total", {{"phase", "mid_stream"}}), 2);
  // Each loss ejected its worker at once (no health check was needed). The last ejection is
  // recorded by the worker call's own completion, which may land just after the client's status.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (h.Metric("pkv_router_worker_ejections_total") < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(h.Metric("pkv_router_worker_ejections_total"), 3);
}

// A worker lost after its last token but before its Complete: the router completes the stream
// (nothing is left to generate, so no replay).
TEST(RouterReliabilityTest, LossAfterTheLastTokenCompletesWithoutReplay) {
  FakeWorker a("a"), b("b");
  a.Start();
  b.Start();
  a.SetScript([](int) { return DiesAfter(5); });
  b.SetScript([](int) { return DiesAfter(5); });
  RouterHarness h(FastOptions({&a, &b}));
  h.Start(2);
  const StreamResult r = h.Run(TokenRequest({1, 2, 3}, 5));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_TRUE(r.complete.has_value());
  EXPECT_EQ(r.complete->finish_reason(), pkv::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.complete->completion_tokens(), 5u);
  EXPECT_EQ(r.complete->prompt_tokens(), 3u);
  EXPECT_EQ(r.complete->migrations(), 0u);
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(a.generate_calls() + b.generate_calls(), 1);
  EXPECT_EQ(h.Metric("pkv_router_migrations_total", {{"phase", "mid_stream"}}), 0);
}

// A replay refused by a full worker is placed again (not counted as another migration).
TEST(RouterReliabilityTest, RefusedReplayIsRePlacedNotCountedAsMigration) {
  FakeWorker first("first"), second("second");
  first.Start();
  second.Start();
  first.SetScript([](int) { return DiesAfter(3); });
  second.SetScript([](int call) {
    FakeScript s;
    s.chunks = 4;
    if (call == 0) s.refuse = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "full");
    return s;
  });
  second.SetRunning(50);  // the first placement goes to `first`
  RouterOptions options = FastOptions({&first, &second});
  options.max_migrations = 1;
  RouterHarness h(options);
  h.Start(2);
  absl::SleepFor(absl::Milliseconds(150));  // a load poll reports second's 50 running
  const StreamResult r = h.Run(TokenRequest({1, 2}, 7));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::vector<uint32_t> expected = first.sent_tokens(0);
  const std::vector<uint32_t> rest = second.sent_tokens(1);
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(r.complete->migrations(), 1u);
  EXPECT_EQ(second.generate_calls(), 2);
  EXPECT_EQ(second.requests()[1].resume_token_ids_size(), 3);
  EXPECT_EQ(h.Metric("pkv_router_migrations_total", {{"phase", "mid_stream"}}), 1);
}

// A worker lost mid-stream is out of rotation before any health check could notice (the health
// interval is far longer than the test), then its half-open probe readmits it.
TEST(RouterReliabilityTest, LostWorkerIsEjectedAtOnceAndReadmittedByTheProbe) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int call) { return call == 0 ? DiesAfter(1) : FakeScript{}; });
  RouterOptions options = FastOptions({&worker});
  options.max_migrations = 0;
  options.eject_base =
      absl::Seconds(2);  // ejected for 1-2 s: far longer than the next request takes
  options.eject_max = absl::Seconds(2);
  RouterHarness h(options);
  h.Start(1);
  EXPECT_EQ(h.Run(TokenRequest({1}, 5)).status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_FALSE(h.router().registry().IsHealthy(0));
  const StreamResult refused = h.Run(TokenRequest({1}, 5));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(worker.generate_calls(), 1) << "nothing is placed on an ejected worker";
  ASSERT_TRUE(h.WaitForHealthy(1, kWait));  // the half-open probe readmits it
  EXPECT_TRUE(h.Run(TokenRequest({1}, 5)).status.ok());
  EXPECT_EQ(h.Metric("pkv_router_worker_ejections_total"), 1);
  EXPECT_EQ(h.Metric("pkv_router_worker_placements_total", {{"worker", worker.address()}}), 2);
}

// A deadline shorter than the admission queue wait ends the stream while queued; the worker
// never sees it (RELIABILITY C4).
TEST(RouterReliabilityTest, DeadlineShorterThanQueueWaitNeverReachesAWorker) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 40;
    s.chunk_interval = absl::Milliseconds(25);
    return s;
  });
  RouterOptions options = FastOptions({&worker});
  options.max_inflight = 1;
  options.max_queue = 4;
  options.queue_timeout = absl::Seconds(10);
  RouterHarness h(options);
  h.Start(1);
  std::thread holder([&] { EXPECT_TRUE(h.Run(TokenRequest({1}, 40)).status.ok()); });
  ASSERT_TRUE(WaitUntil([&] { return worker.generate_calls() == 1; }));
  const absl::Time start = absl::Now();
  const StreamResult r = h.Run(TokenRequest({2}, 4), absl::Milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5))
      << "ended by its deadline, not the queue timeout";
  holder.join();
  EXPECT_EQ(worker.generate_calls(), 1);
  EXPECT_EQ(h.MetricWhen(0, "pkv_router_queue_depth"), 0);
}

// The admission queue is bounded in prompt tokens as well as in requests.
TEST(RouterReliabilityTest, QueueIsBoundedInPromptTokens) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 30;
    s.chunk_interval = absl::Milliseconds(20);
    return s;
  });
  RouterOptions options = FastOptions({&worker});
  options.max_inflight = 1;
  options.max_queue = 10;
  options.max_queue_tokens = 5;
  RouterHarness h(options);
  h.Start(1);
  std::thread holder([&] { EXPECT_TRUE(h.Run(TokenRequest({1}, 30)).status.ok()); });
  ASSERT_TRUE(WaitUntil([&] { return worker.generate_calls() == 1; }));
  std::thread queued([&] { EXPECT_TRUE(h.Run(TokenRequest({1, 2, 3, 4}, 2)).status.ok()); });
  ASSERT_TRUE(WaitUntil([&] { return h.Metric("pkv_router_queue_depth") == 1; }));
  const StreamResult over = h.Run(TokenRequest({1, 2}, 2));  // 4 + 2 > 5 tokens
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.status.error_message().find("5 prompt tokens"), std::string::npos)
      << over.status.error_message();
  EXPECT_EQ(over.trailers.count("grpc-retry-pushback-ms"), 1u);
  const StreamResult fits = h.Run(TokenRequest({1}, 2), absl::Seconds(30));  // 4 + 1 <= 5
  EXPECT_TRUE(fits.status.ok()) << fits.status.error_message();
  holder.join();
  queued.join();
}

grpc::health::v1::HealthCheckResponse::ServingStatus HealthOf(const std::string& address,
                                                              const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_TRUE(stub->Check(&ctx, request, &response).ok());
  return response.status();
}

// Drain: readiness NOT_SERVING at once, liveness stays SERVING while a stream finishes.
TEST(RouterReliabilityTest, DrainFlipsReadinessNotLiveness) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int) {
    FakeScript s;
    s.chunks = 20;
    s.chunk_interval = absl::Milliseconds(20);
    return s;
  });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  using Health = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(HealthOf(h.address(), "pkv.v1.Generation"), Health::SERVING);
  std::thread stream([&] { EXPECT_TRUE(h.Run(TokenRequest({1}, 20)).status.ok()); });
  ASSERT_TRUE(WaitUntil([&] { return worker.generate_calls() == 1; }));
  const std::string address = h.address();
  std::thread drain([&] { EXPECT_TRUE(h.router().Drain(absl::Seconds(10))); });
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(address, "pkv.v1.Generation") != Health::SERVING; }));
  EXPECT_EQ(HealthOf(address, ""), Health::SERVING);
  stream.join();
  drain.join();
}

// DNS membership: a discovered worker removed while a stream runs on it finishes that stream,
// gets no new placements, and is retired once idle; when it comes back it is used again.
TEST(RouterReliabilityTest, RemovedWorkerFinishesItsStreamsThenRetires) {
  FakeWorker fixed("static"), dynamic("dns");
  fixed.Start();
  dynamic.Start();
  dynamic.SetScript([](int) {
    FakeScript s;
    s.chunks = 15;
    s.chunk_interval = absl::Milliseconds(20);
    return s;
  });
  fixed.SetRunning(50);  // two choices between the two: the first stream goes to `dns`
  RouterHarness h(FastOptions({&fixed}));
  h.Start(1);
  WorkerRegistry& registry = h.router().registry();
  registry.SetDiscovered({dynamic.address(), fixed.address()});  // the static one stays static
  ASSERT_TRUE(h.WaitForHealthy(2));
  EXPECT_EQ(registry.size(), 2);
  absl::SleepFor(absl::Milliseconds(150));  // a load poll reports fixed's 50 running
  std::thread stream([&] { EXPECT_TRUE(h.Run(TokenRequest({1}, 15)).status.ok()); });
  ASSERT_TRUE(WaitUntil([&] { return dynamic.generate_calls() == 1; }));
  registry.SetDiscovered({});
  EXPECT_EQ(registry.size(), 1);
  EXPECT_TRUE(h.Run(TokenRequest({2}, 4)).status.ok());  // placed on the static worker
  EXPECT_EQ(dynamic.generate_calls(), 1);
  stream.join();
  const int slot = 1;
  ASSERT_TRUE(WaitUntil([&] { return registry.stub(slot) == nullptr; })) << "retired once idle";
  EXPECT_EQ(registry.num_slots(), 2);
  registry.SetDiscovered({dynamic.address()});
  ASSERT_TRUE(h.WaitForHealthy(2));
  EXPECT_EQ(registry.num_slots(), 2) << "the returning address reuses its slot";
  EXPECT_NE(registry.stub(slot), nullptr);
}

}  // namespace
}  // namespace pkv::router::testing
