// The router's direct calls into a worker in its own process (router/direct_worker_call.h): a
// stream placed on an in-process worker with a DirectWorker runs through it, not over the
// worker's channel; the client's cancel and deadline end a call the worker never answers at once
// and reach the worker as a cancel; a refused direct call (draining) is re-placed like a refused
// RPC; a late end from the worker after the router gave up is ignored. The DirectWorker here is
// scripted (the real one, over the engine, is covered by colocated_integration_test); the
// in-process worker's health, load and model info come from a FakeWorker over its channel.
#include <algorithm>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "router/direct_worker.h"
#include "tests/unit/router/fake_worker.h"
#include "tests/unit/router/router_harness.h"

namespace pkv::router::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// Streams Accepted and `chunks` one-token chunks from a thread of its own, then completes, or
// (hang) waits for the router's cancel and only then ends CANCELLED (a late end), or refuses.
class ScriptedDirectWorker final : public DirectWorker {
 public:
  struct Script {
    absl::Status refuse;  // non-OK: Generate fails with it, nothing queued
    int chunks = 3;
    bool hang = false;
  };
  explicit ScriptedDirectWorker(Script script) : script_(std::move(script)) {}
  ~ScriptedDirectWorker() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  absl::StatusOr<std::unique_ptr<DirectGeneration>> Generate(
      const pkv::v1::WorkerGenerateRequest& request, absl::Time deadline,
      std::shared_ptr<DirectStreamSink> sink) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    deadlines_.push_back(deadline);
    if (!script_.refuse.ok()) return script_.refuse;
    const int id = calls_;
    threads_.emplace_back([this, id, sink, max_tokens = request.request().sampling().max_tokens()] {
      Run(id, sink, static_cast<int>(max_tokens));
    });
    return std::make_unique<Generation>(this, id);
  }

  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int cancels() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(cancelled_.size());
  }
  bool WaitForCancels(int n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n] { return static_cast<int>(cancelled_.size()) >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  std::vector<absl::Time> deadlines() const {
    absl::MutexLock lock(&mu_);
    return deadlines_;
  }

 private:
  class Generation final : public DirectGeneration {
   public:
    Generation(ScriptedDirectWorker* worker, int id) : worker_(worker), id_(id) {}
    void Cancel() override {
      absl::MutexLock lock(&worker_->mu_);
      worker_->cancelled_.push_back(id_);
    }

   private:
    ScriptedDirectWorker* const worker_;
    const int id_;
  };

  void Run(int id, const std::shared_ptr<DirectStreamSink>& sink, int max_tokens) {
    pkv::v1::WorkerGenerateResponse accepted;
    accepted.mutable_accepted()->add_prompt_token_ids(1);
    accepted.mutable_accepted()->set_worker_id("w-direct");
    sink->OnMessage(std::move(accepted));
    for (int i = 0; i < script_.chunks; ++i) {
      pkv::v1::WorkerGenerateResponse chunk;
      chunk.mutable_chunk()->add_token_ids(static_cast<uint32_t>(10 + i));
      sink->OnMessage(std::move(chunk));
    }
    if (!script_.hang) {
      pkv::v1::WorkerGenerateResponse complete;
      complete.mutable_complete()->set_completion_tokens(static_cast<uint32_t>(max_tokens));
      sink->OnMessage(std::move(complete));
      sink->OnEnd(absl::OkStatus());
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      auto cancelled_or_stopping = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || std::find(cancelled_.begin(), cancelled_.end(), id) != cancelled_.end();
      };
      mu_.Await(absl::Condition(&cancelled_or_stopping));
    }
    // A late chunk and end, after the router gave up: the router ignores both.
    pkv::v1::WorkerGenerateResponse late;
    late.mutable_chunk()->add_token_ids(99);
    sink->OnMessage(std::move(late));
    sink->OnEnd(absl::CancelledError("request cancelled"));
  }

  const Script script_;
  mutable absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Time> deadlines_ ABSL_GUARDED_BY(mu_);
  std::vector<int> cancelled_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

// A started router with one in-process worker: `local` answers health, load and model info over
// its channel, `direct` takes the Generate streams; `tcp_workers` (started) are its other workers.
struct DirectRouter {
  explicit DirectRouter(ScriptedDirectWorker::Script script,
                        const std::vector<FakeWorker*>& tcp_workers = {})
      : direct(std::make_shared<ScriptedDirectWorker>(std::move(script))),
        h(FastOptions(tcp_workers)) {
    local.Start();
    h.router().AddInProcessWorker({"direct:w-local", local.InProcessChannel(), direct});
    h.Start(1 + static_cast<int>(tcp_workers.size()));
  }
  FakeWorker local{"w-local"};
  std::shared_ptr<ScriptedDirectWorker> direct;
  RouterHarness h;
};

TEST(DirectWorkerCallTest, StreamsThroughTheDirectCallNotTheChannel) {
  DirectRouter c(ScriptedDirectWorker::Script{});
  auto& [local, direct, h] = c;
  const StreamResult r = h.Run(TokenRequest({1, 2, 3}, 3));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_TRUE(r.complete.has_value());
  EXPECT_EQ(r.tokens, (std::vector<uint32_t>{10, 11, 12}));
  EXPECT_EQ(r.complete->worker_id(), "w-direct");
  EXPECT_EQ(direct->calls(), 1);
  EXPECT_EQ(local.generate_calls(), 0);  // nothing went over the in-process channel
  EXPECT_EQ(h.Metric("pkv_router_worker_placements_total", {{"worker", "direct:w-local"}}), 1);
  EXPECT_EQ(h.MetricWhen(0, "pkv_router_inflight"), 0);
}

// registry().inflight(w) once it reaches `value` (bounded wait): a hanging worker's load comes
// back with its late end, which it sends only after it has seen the router's cancel, so it may
// arrive after the client's status and after WaitForCancels returns.
int WorkerInflightWhen(RouterHarness& h, int w, int value) {
  const absl::Time deadline = absl::Now() + kWait;
  int got = h.router().registry().inflight(w);
  while (got != value && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
    got = h.router().registry().inflight(w);
  }
  return got;
}

TEST(DirectWorkerCallTest, ClientCancelEndsAHangingCallAndCancelsTheWorker) {
  DirectRouter c(ScriptedDirectWorker::Script{absl::OkStatus(), /*chunks=*/1, /*hang=*/true});
  auto& [local, direct, h] = c;
  grpc::ClientContext ctx;
  auto reader = h.stub().Generate(&ctx, TokenRequest({1}, 10));
  pkv::v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));  // Accepted or the chunk: the stream runs
  ctx.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(direct->WaitForCancels(1));
  // The router's slot and the worker's load come back though the worker ended only after.
  EXPECT_EQ(h.MetricWhen(0, "pkv_router_inflight"), 0);
  EXPECT_EQ(WorkerInflightWhen(h, 0, 0), 0);
}

TEST(DirectWorkerCallTest, DeadlineReachesTheWorkerAndEndsAHangingCall) {
  DirectRouter c(ScriptedDirectWorker::Script{absl::OkStatus(), /*chunks=*/1, /*hang=*/true});
  auto& [local, direct, h] = c;
  const absl::Time before = absl::Now();
  const StreamResult r = h.Run(TokenRequest({1}, 10), absl::Milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_EQ(direct->deadlines().size(), 1u);
  EXPECT_LT(direct->deadlines()[0], before + absl::Seconds(2));  // propagated, not infinite
  EXPECT_TRUE(direct->WaitForCancels(1));
  EXPECT_EQ(h.MetricWhen(0, "pkv_router_inflight"), 0);
}

TEST(DirectWorkerCallTest, RefusedDirectCallIsPlacedOnAnotherWorker) {
  FakeWorker tcp("w-tcp");
  tcp.Start();
  DirectRouter c(ScriptedDirectWorker::Script{absl::UnavailableError(
                     "worker is draining; retry on another worker")},
                 {&tcp});
  auto& [local, direct, h] = c;
  for (int i = 0; i < 64 && direct->calls() == 0; ++i) {
    const StreamResult r = h.Run(TokenRequest({1, 2, static_cast<uint32_t>(i)}, 3));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_TRUE(r.complete.has_value());
    EXPECT_EQ(r.complete->worker_id(), "w-tcp");
  }
  EXPECT_GT(direct->calls(), 0) << "no stream was placed on the direct worker";
  EXPECT_EQ(local.generate_calls(), 0);
}

}  // namespace
}  // namespace pkv::router::testing
