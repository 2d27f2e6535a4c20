// Overload, deadlines and cancellation through real processes (RELIABILITY.md L3, C1, C3, C4):
// a flood of 10x the router's admission limit, a flood straight at a worker, deadlines that end
// streams mid-decode, expire on arrival or in a worker's queue, and a cancellation matrix over
// several seeds. Counts are asserted exactly against the workers' abort counters and page ledger.
#include <atomic>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

std::string Aborts(const char* reason) {
  return absl::StrCat("pkv_seq_aborts_total{reason=\"", reason, "\"}");
}

// L3: 10x (max_inflight + max_queue) Generate calls at once over separate connections. The excess
// is refused with RESOURCE_EXHAUSTED and a retry hint, every admitted stream completes in full,
// the rejection counter matches the client's count, and memory stays bounded.
TEST(OverloadTest, FloodOfTenTimesTheAdmissionLimit) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:20"},
                              {"--max_inflight=8", "--max_queue=8", "--queue_timeout=30s"});
  ASSERT_NE(cluster, nullptr);
  constexpr int kCalls = 160;  // 10 x (8 + 8)
  const int64_t router_rss = RssKiB(cluster->router().pid());
  const int64_t worker_rss = RssKiB(cluster->worker(0).process->pid());
  const double rejected_before =
      RouterSample(*cluster, "pkv_router_admission_rejected_total{reason=\"queue_full\"}");
  std::vector<pkv::v1::GenerateRequest> requests;
  for (int i = 0; i < kCalls; ++i) requests.push_back(GreedyRequest(i % 7, 16, 20));
  const std::vector<Outcome> outcomes = RunConcurrently(*cluster, requests, kStreamDeadline);
  int ok = 0, exhausted = 0;
  for (const Outcome& o : outcomes) {
    if (o.status.ok()) {
      ++ok;
      EXPECT_EQ(o.tokens.size(), 20u);
    } else if (o.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      EXPECT_TRUE(o.tokens.empty());
      EXPECT_EQ(o.trailers.count("grpc-retry-pushback-ms"), 1u) << o.status.error_message();
    }
  }
  const int64_t router_growth = RssKiB(cluster->router().pid()) - router_rss;
  const int64_t worker_growth = RssKiB(cluster->worker(0).process->pid()) - worker_rss;
  std::cout << "flood: " << ok << " admitted, " << exhausted << " RESOURCE_EXHAUSTED of " << kCalls
            << "; RSS growth router " << router_growth << " KiB, worker " << worker_growth << " KiB"
            << std::endl;
  EXPECT_EQ(ok + exhausted, kCalls) << CodeSummary(outcomes);
  EXPECT_GE(ok, 16) << "at least the slots and the queue were admitted";
  EXPECT_GE(exhausted, kCalls / 2) << "the excess of a burst is refused, not queued";
  EXPECT_EQ(RouterSample(*cluster, "pkv_router_admission_rejected_total{reason=\"queue_full\"}") -
                rejected_before,
            exhausted);
  // Bounded memory: the refused calls cost nothing lasting (Triton's bar is 100 MB; ours 64 MiB).
  EXPECT_LT(router_growth, 64 * 1024);
  EXPECT_LT(worker_growth, 64 * 1024);
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(w), absl::Seconds(10)).ok()) << w;
  }
}

// A flood straight at one worker: it admits max_running + max_waiting and refuses the rest at
// once with RESOURCE_EXHAUSTED + grpc-retry-pushback-ms (nothing piles up in its inbox).
TEST(OverloadTest, WorkerBoundsItsQueueUnderAFlood) {
  auto cluster =
      StartCluster(1, {"--test_fault=slow_step_ms:20", "--max_running=4", "--max_waiting=4"});
  ASSERT_NE(cluster, nullptr);
  constexpr int kCalls = 80;
  std::atomic<int> ok{0}, exhausted{0}, with_hint{0};
  absl::Mutex mu;
  std::string unexpected;  // the other statuses, for the failure message
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto stub = pkv::v1::Worker::NewStub(grpc::CreateCustomChannel(
          cluster->worker(0).address(), grpc::InsecureChannelCredentials(), args));
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + kStreamDeadline));
      ctx.set_wait_for_ready(true);  // 80 fresh connections at once: no transient connect failure
      pkv::v1::WorkerGenerateRequest request;
      *request.mutable_request() = GreedyRequest(i, 8, 40);
      request.mutable_request()->set_request_id(absl::StrCat("flood-", i));
      auto reader = stub->Generate(&ctx, request);
      pkv::v1::WorkerGenerateResponse response;
      while (reader->Read(&response)) {
      }
      const grpc::Status status = reader->Finish();
      if (status.ok()) ++ok;
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++exhausted;
        with_hint += ctx.GetServerTrailingMetadata().count("grpc-retry-pushback-ms") == 1;
      } else if (!status.ok()) {
        absl::MutexLock lock(&mu);
        absl::StrAppend(&unexpected, status.error_code(), ": ", status.error_message(), "; ");
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok + exhausted, kCalls) << unexpected;
  // Submit admits up to max_running + max_waiting in flight; the scheduler's own waiting bound
  // may refuse a few of those while none has started running yet, so at least max_waiting.
  EXPECT_GE(ok, 4);
  EXPECT_GE(exhausted, kCalls / 2);
  EXPECT_EQ(with_hint.load(), exhausted.load());
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(0), absl::Seconds(10)).ok());
}

// C3: a 500 ms deadline on requests that need seconds. The client gets DEADLINE_EXCEEDED, the
// remaining deadline reached the worker, which aborted each one (reason "deadline") and freed
// its pages.
TEST(OverloadTest, DeadlineEndsTheWorkersSequence) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:25"});
  ASSERT_NE(cluster, nullptr);
  const double before = SumOverWorkers(*cluster, {0, 1}, Aborts("deadline"));
  std::vector<pkv::v1::GenerateRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(GreedyRequest(900 + i, 10, 200));
  const std::vector<Outcome> outcomes =
      RunConcurrently(*cluster, requests, absl::Milliseconds(500));
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_FALSE(o.tokens.empty()) << "it was decoding when the deadline hit";
    EXPECT_LT(o.elapsed, absl::Seconds(5));
  }
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(w), absl::Seconds(10)).ok()) << w;
  }
  EXPECT_EQ(SumOverWorkers(*cluster, {0, 1}, Aborts("deadline")) - before, 6);
  EXPECT_EQ(SumOverWorkers(*cluster, {0, 1}, Aborts("client_cancel")), 0);
}

// C4: requests that expire on arrival (1 ms) or while waiting in a busy worker's queue never get
// a prefill: 0 prefill tokens (so 0 KV pages) for them; the queued ones count as deadline aborts.
TEST(OverloadTest, ExpiredBeforePrefillCostsNoKvPages) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:50", "--max_running=1"});
  ASSERT_NE(cluster, nullptr);
  // Keep both engines busy (one long stream each) so nothing new is scheduled instantly.
  std::vector<pkv::v1::GenerateRequest> busy = {GreedyRequest(1, 8, 300), GreedyRequest(2, 8, 300)};
  for (int w = 0; w < 2; ++w) busy[w].set_session_id(SessionOn(*cluster, w));
  std::atomic<int> running{0};
  std::vector<StreamControl> busy_controls(2);
  for (auto& c : busy_controls) {
    c.cancel_after = absl::Seconds(3);
    c.on_progress = [&running](int n) {
      if (n == 1) running.fetch_add(1);
    };
  }
  std::vector<Outcome> busy_outcomes;
  std::thread busy_thread(
      [&] { busy_outcomes = RunConcurrently(*cluster, busy, kStreamDeadline, busy_controls); });
  ASSERT_TRUE(WaitFor([&] { return running.load() == 2; }, absl::Seconds(20)));
  // One busy stream on each worker (the gauge is published after the step that sampled).
  ASSERT_TRUE(WaitFor(
      [&] {
        return SumOverWorkers(*cluster, {0, 1}, "pkv_requests{state=\"running\"}") == 2;
      },
      absl::Seconds(5)));
  const double prefill = SumOverWorkers(*cluster, {0, 1}, "pkv_prefill_tokens_total");
  const double deadline_aborts = SumOverWorkers(*cluster, {0, 1}, Aborts("deadline"));
  std::vector<pkv::v1::GenerateRequest> late;
  for (int i = 0; i < 4; ++i) late.push_back(GreedyRequest(950 + i, 12, 4));
  for (const Outcome& o : RunConcurrently(*cluster, late, absl::Milliseconds(1))) {
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // Deadline 300 ms behind a busy worker with max_running=1: they wait in its queue and expire.
  const std::vector<Outcome> queued = RunConcurrently(*cluster, late, absl::Milliseconds(300));
  for (const Outcome& o : queued) {
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_TRUE(o.tokens.empty());
  }
  // The workers drop them at their next step (a 50 ms sleep here): wait for the queues to empty.
  EXPECT_TRUE(WaitFor(
      [&] {
        return SumOverWorkers(*cluster, {0, 1}, "pkv_requests{state=\"waiting\"}") == 0;
      },
      absl::Seconds(10)));
  const double queued_aborts =
      SumOverWorkers(*cluster, {0, 1}, Aborts("deadline")) - deadline_aborts;
  EXPECT_GE(queued_aborts, 4) << "the four queued ones were dropped by the workers";
  EXPECT_LE(queued_aborts, 8) << "at most every late request";
  EXPECT_EQ(SumOverWorkers(*cluster, {0, 1}, "pkv_prefill_tokens_total"), prefill)
      << "no expired request was prefilled";
  busy_thread.join();
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(w), absl::Seconds(10)).ok()) << w;
  }
}

// C1: 24 streams, a third cancelled at a random moment (while queued behind max_running, during
// a multi-step prefill, after the first token, mid-decode), five seeds. Per iteration: the
// workers' client_cancel aborts equal the cancels exactly, at most two tokens are computed per
// cancelled stream after its cancel, uncancelled streams equal the reference, no page leaks.
TEST(OverloadTest, CancellationMatrixOverSeeds) {
  auto cluster =
      StartCluster(2, {"--test_fault=slow_step_ms:15", "--max_running=4", "--max_batch_tokens=32"});
  ASSERT_NE(cluster, nullptr);
  std::vector<pkv::v1::GenerateRequest> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(GreedyRequest(1000 + i, i % 2 ? 120 : 10, 45));
  const std::vector<Outcome> reference = References(*cluster, prompts);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    const double cancels_before = SumOverWorkers(*cluster, {0, 1}, Aborts("client_cancel"));
    const double after_before = SumOverWorkers(*cluster, {0, 1}, "pkv_tokens_after_cancel_total");
    std::vector<pkv::v1::GenerateRequest> requests;
    std::vector<StreamControl> controls;
    std::vector<size_t> prompt_of;
    for (int i = 0; i < 24; ++i) {
      prompt_of.push_back(rng() % prompts.size());
      requests.push_back(prompts[prompt_of.back()]);
      StreamControl c;
      if (i % 3 == 0) {
        // Cancel by time (queued or prefilling) or after a few tokens (decoding); both leave at
        // least 15 of the 45 tokens, so a cancel never races the stream's completion.
        if (rng() % 2) {
          c.cancel_after = absl::Milliseconds(100 + rng() % 300);
        } else {
          c.cancel_after_tokens = 1 + rng() % 25;
        }
      }
      controls.push_back(c);
    }
    const std::vector<Outcome> outcomes =
        RunConcurrently(*cluster, requests, kStreamDeadline, controls);
    int cancelled = 0;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i].cancelled_by_client) {
        ASSERT_FALSE(outcomes[i].completed) << "a cancel raced a completion; widen the margin";
        EXPECT_EQ(outcomes[i].status.error_code(), grpc::StatusCode::CANCELLED);
        ++cancelled;
        continue;
      }
      EXPECT_TRUE(outcomes[i].status.ok()) << outcomes[i].status.error_message();
      EXPECT_EQ(outcomes[i].tokens, reference[prompt_of[i]].tokens) << i;
    }
    for (int w = 0; w < 2; ++w) {
      EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(w), absl::Seconds(10)).ok()) << w;
    }
    EXPECT_EQ(cancelled, 8);
    EXPECT_EQ(SumOverWorkers(*cluster, {0, 1}, Aborts("client_cancel")) - cancels_before,
              cancelled);
    EXPECT_LE(SumOverWorkers(*cluster, {0, 1}, "pkv_tokens_after_cancel_total") - after_before,
              2 * cancelled);
  }
}

}  // namespace
}  // namespace pkv::testing
