// Router service-level behaviour: admission (RESOURCE_EXHAUSTED with pushback when full, queue
// timeout, queued requests admitted in turn), no healthy worker, health, drain, Abort forwarding
// and GetModelInfo.
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/unit/router/fake_worker.h"
#include "tests/unit/router/router_harness.h"

namespace pkv::router::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

FakeScript HangAfterOneChunk() {
  FakeScript s;
  s.chunks = 1;
  s.end = FakeScript::End::kHang;
  return s;
}

// Opens a stream and reads its first chunk, so it holds an admission slot.
struct OpenStream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<pkv::v1::GenerateResponse>> reader;
};

std::unique_ptr<OpenStream> OpenAndReadFirstChunk(RouterHarness& h) {
  auto s = std::make_unique<OpenStream>();
  s->reader = h.stub().Generate(&s->ctx, TokenRequest({1}, 10));
  pkv::v1::GenerateResponse response;
  EXPECT_TRUE(s->reader->Read(&response));
  return s;
}

void CancelAndFinish(OpenStream& s) {
  s.ctx.TryCancel();
  pkv::v1::GenerateResponse response;
  while (s.reader->Read(&response)) {
  }
  s.reader->Finish();
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(RouterHarness& h,
                                                            const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(h.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&ctx, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

TEST(RouterServerTest, RejectsAtOnceWhenInflightAndQueueAreFull) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int) { return HangAfterOneChunk(); });
  RouterOptions options = FastOptions({&worker});
  options.max_inflight = 2;
  options.max_queue = 0;
  options.retry_pushback = absl::Milliseconds(777);
  RouterHarness h(options);
  h.Start(1);
  auto first = OpenAndReadFirstChunk(h);
  auto second = OpenAndReadFirstChunk(h);
  const StreamResult rejected = h.Run(TokenRequest({1}, 4));
  EXPECT_EQ(rejected.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(rejected.trailers.at("grpc-retry-pushback-ms"), "777");
  EXPECT_EQ(worker.generate_calls(), 2);  // the rejected request never reached the worker
  EXPECT_EQ(h.Metric("pkv_router_admission_rejected_total", {{"reason", "queue_full"}}), 1);
  EXPECT_EQ(h.Metric("pkv_router_inflight"), 2);
  CancelAndFinish(*first);
  CancelAndFinish(*second);
}

TEST(RouterServerTest, QueuedRequestTimesOutWithResourceExhausted) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int) { return HangAfterOneChunk(); });
  RouterOptions options = FastOptions({&worker});
  options.max_inflight = 1;
  options.max_queue = 1;
  options.queue_timeout = absl::Milliseconds(100);
  RouterHarness h(options);
  h.Start(1);
  auto holder = OpenAndReadFirstChunk(h);
  const StreamResult r = h.Run(TokenRequest({1}, 4));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(r.status.error_message().find("no slot within 100 ms"), std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(r.trailers.count("grpc-retry-pushback-ms"), 1u);
  EXPECT_EQ(h.Metric("pkv_router_admission_rejected_total", {{"reason", "queue_timeout"}}), 1);
  CancelAndFinish(*holder);
}

TEST(RouterServerTest, QueuedRequestRunsWhenASlotFrees) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int call) { return call == 0 ? HangAfterOneChunk() : FakeScript{}; });
  RouterOptions options = FastOptions({&worker});
  options.max_inflight = 1;
  options.max_queue = 4;
  options.queue_timeout = absl::Minutes(1);
  RouterHarness h(options);
  h.Start(1);
  auto holder = OpenAndReadFirstChunk(h);
  StreamResult queued;
  std::thread waiter([&] { queued = h.Run(TokenRequest({2}, 4)); });
  const absl::Time until = absl::Now() + kWait;
  while (h.Metric("pkv_router_queue_depth") < 1 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(h.Metric("pkv_router_queue_depth"), 1);
  EXPECT_EQ(worker.generate_calls(), 1);
  CancelAndFinish(*holder);  // frees the slot; the queued request goes through
  waiter.join();
  EXPECT_TRUE(queued.status.ok()) << queued.status.error_message();
  EXPECT_EQ(worker.generate_calls(), 2);
  EXPECT_EQ(h.MetricWhen(0, "pkv_router_queue_depth"), 0);
}

TEST(RouterServerTest, NoHealthyWorkerIsUnavailableAndNotServing) {
  FakeWorker worker("w");
  worker.Start();
  const std::string address = worker.address();
  worker.Stop();  // nothing listens there any more
  RouterOptions options;
  options.listen = "127.0.0.1:0";
  options.workers = {address};
  options.health_interval = absl::Milliseconds(50);
  RouterHarness h(options);
  h.Start(0);
  const StreamResult r = h.Run(TokenRequest({1}, 4));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("no healthy worker"), std::string::npos);
  // Liveness ("") is the process; readiness (the service name) needs a healthy worker.
  EXPECT_EQ(Health(h, ""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(h, "pkv.v1.Generation"), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  grpc::ClientContext ctx;
  pkv::v1::ModelInfo info;
  EXPECT_EQ(h.stub().GetModelInfo(&ctx, {}, &info).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(h.Metric("pkv_router_workers", {{"state", "unhealthy"}}), 1);
}

TEST(RouterServerTest, FollowsWorkerHealthBothWays) {
  FakeWorker worker("w");
  worker.Start();
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  EXPECT_EQ(Health(h, "pkv.v1.Generation"), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(h.Metric("pkv_router_workers", {{"state", "healthy"}}), 1);
  worker.SetServing(false);
  ASSERT_TRUE(h.WaitForHealthy(0, kWait));
  EXPECT_EQ(h.Run(TokenRequest({1}, 4)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  worker.SetServing(true);
  ASSERT_TRUE(h.WaitForHealthy(1, kWait));
  EXPECT_TRUE(h.Run(TokenRequest({1}, 4)).status.ok());
}

TEST(RouterServerTest, ModelInfoAndAbortEndsTheStreamAtTheRouter) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int) { return HangAfterOneChunk(); });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  {
    grpc::ClientContext ctx;
    pkv::v1::ModelInfo info;
    ASSERT_TRUE(h.stub().GetModelInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.vocab_size(), kFakeVocab);
    EXPECT_EQ(info.max_context(), kFakeMaxContext);
    EXPECT_EQ(info.kv_pages_total(), 0u);
  }
  auto stream = std::make_unique<OpenStream>();
  pkv::v1::GenerateRequest request = TokenRequest({1}, 10);
  request.set_request_id("abort-me");
  stream->reader = h.stub().Generate(&stream->ctx, request);
  pkv::v1::GenerateResponse response;
  ASSERT_TRUE(stream->reader->Read(&response));
  pkv::v1::AbortRequest abort;
  abort.set_request_id("abort-me");
  pkv::v1::AbortResponse answer;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(h.stub().Abort(&ctx, abort, &answer).ok());
  }
  EXPECT_TRUE(answer.found());
  // The router ends the client's stream CANCELLED and cancels the worker call; it does not
  // forward the Abort (whose CANCELLED would read as the worker's failure) nor eject anyone.
  grpc::Status aborted = stream->reader->Finish();
  EXPECT_EQ(aborted.error_code(), grpc::StatusCode::CANCELLED) << aborted.error_message();
  EXPECT_NE(aborted.error_message().find("Abort"), std::string::npos) << aborted.error_message();
  EXPECT_TRUE(worker.WaitForCancelled(1, kWait));
  EXPECT_TRUE(worker.aborted_ids().empty());
  EXPECT_TRUE(h.WaitForHealthy(1, kWait));
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(h.stub().Abort(&ctx, abort, &answer).ok());
  }
  EXPECT_FALSE(answer.found()) << "a finished stream is not found";
  abort.set_request_id("unknown-id");
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(h.stub().Abort(&ctx, abort, &answer).ok());
  }
  EXPECT_FALSE(answer.found());
  abort.set_request_id("bad id");
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(h.stub().Abort(&ctx, abort, &answer).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST(RouterServerTest, DrainLetsInFlightFinishAndRefusesNewStreams) {
  FakeWorker worker("w");
  worker.Start();
  worker.SetScript([](int call) {
    FakeScript s;
    s.chunks = call == 0 ? 6 : 1;
    s.chunk_interval = absl::Milliseconds(call == 0 ? 50 : 0);
    return s;
  });
  RouterHarness h(FastOptions({&worker}));
  h.Start(1);
  auto inflight = OpenAndReadFirstChunk(h);
  bool drained = false;
  std::thread drainer([&] { drained = h.router().Drain(kWait); });
  const absl::Time until = absl::Now() + kWait;
  // New streams are refused while the in-flight one keeps going.
  StreamResult refused;
  do {
    refused = h.Run(TokenRequest({1}, 2));
  } while (refused.status.ok() && absl::Now() < until);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.status.error_message().find("draining"), std::string::npos);
  pkv::v1::GenerateResponse response;
  int chunks = 1;
  bool completed = false;
  while (inflight->reader->Read(&response)) {
    chunks += response.has_chunk();
    completed |= response.has_complete();
  }
  EXPECT_TRUE(inflight->reader->Finish().ok());
  EXPECT_TRUE(completed);
  EXPECT_EQ(chunks, 6);
  drainer.join();
  EXPECT_TRUE(drained);
}

// In-process workers (colocated/): reached over their server's in-process channel, they are
// ordinary registry members: placed beside TCP workers, cancelled, given the client's deadline.
TEST(RouterServerTest, InProcessWorkerIsPlacedBesideATcpWorker) {
  FakeWorker tcp("w-tcp"), local("w-local");
  tcp.Start();
  local.Start();
  RouterHarness h(FastOptions({&tcp}));
  h.router().AddInProcessWorker({"inproc:w-local", local.InProcessChannel()});
  h.Start(2);
  for (int i = 0; i < 64 && (tcp.generate_calls() == 0 || local.generate_calls() == 0); ++i) {
    StreamResult r = h.Run(TokenRequest({1, 2, static_cast<uint32_t>(i)}, 3));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_TRUE(r.complete.has_value());
  }
  EXPECT_GT(tcp.generate_calls(), 0);
  EXPECT_GT(local.generate_calls(), 0);
  EXPECT_EQ(h.Metric("pkv_router_worker_placements_total", {{"worker", "inproc:w-local"}}),
            local.generate_calls());
}

TEST(RouterServerTest, InProcessWorkerAloneGetsCancelAndDeadline) {
  FakeWorker local("w-local");
  local.Start();
  local.SetScript([](int) { return HangAfterOneChunk(); });
  RouterHarness h(FastOptions({}));  // no TCP worker: the in-process one is a worker source
  h.router().AddInProcessWorker({"inproc:w-local", local.InProcessChannel()});
  h.Start(1);
  std::unique_ptr<OpenStream> open = OpenAndReadFirstChunk(h);
  CancelAndFinish(*open);
  EXPECT_TRUE(local.WaitForCancelled(1, kWait));

  const auto before = std::chrono::system_clock::now();
  StreamResult r = h.Run(TokenRequest({1}, 10), absl::Milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_EQ(local.deadlines().size(), 2u);
  EXPECT_LT(local.deadlines()[1], before + std::chrono::seconds(2));  // propagated, not infinite
  EXPECT_TRUE(local.WaitForCancelled(2, kWait));
}

}  // namespace
}  // namespace pkv::router::testing
