// Migration and failover through real processes (RELIABILITY.md F1, F1b, F7): a worker is
// `kill -9`ed while greedy and seeded streams run on it, while requests wait in its queue, during a
// long prefill, and repeatedly (flapping). Every stream must complete with exactly the token ids
// and text of an uninterrupted run, and the router's counters must match what happened.
// Workers sleep slow_step_ms per step so streams last long enough to be interrupted; nothing here
// asserts a speed.
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

void ExpectSameAsReference(const Outcome& got, const Outcome& reference, const std::string& what) {
  EXPECT_TRUE(got.status.ok()) << what << ": " << got.status.error_message();
  EXPECT_TRUE(got.completed) << what;
  EXPECT_EQ(got.tokens, reference.tokens) << what << ": no duplicate, no gap, same tokens";
  EXPECT_EQ(got.text, reference.text) << what;
  EXPECT_EQ(got.complete.completion_tokens(), reference.complete.completion_tokens()) << what;
}

// F1 with migration: greedy and seeded streams interrupted by kill -9 of their worker continue on
// the other worker; the output equals an uninterrupted run; the mid-stream migration counter
// equals the number of streams that were on the killed worker.
TEST(MigrationTest, KilledWorkersStreamsContinueExactly) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:20"});
  ASSERT_NE(cluster, nullptr);
  std::vector<pkv::v1::GenerateRequest> requests;
  for (int i = 0; i < 10; ++i) {
    requests.push_back(i % 2 == 0 ? GreedyRequest(i, 5 + 7 * i, 60)
                                  : SeededRequest(i, 5 + 7 * i, 60, 1000 + i));
    // Stop strings exercise the primed detokenizer across the move (they never match here).
    requests.back().mutable_sampling()->add_stop("\x01\x02 never");
  }
  const std::vector<Outcome> reference = References(*cluster, requests);
  const double migrations_before =
      RouterSample(*cluster, "pkv_router_migrations_total{phase=\"mid_stream\"}");

  std::atomic<int> started{0};
  std::vector<StreamControl> controls(requests.size());
  for (auto& c : controls) {
    c.on_progress = [&started](int tokens) {
      if (tokens == 8) started.fetch_add(1);
    };
  }
  // Every other stream pinned to W0 (session affinity), so the kill surely interrupts some.
  std::vector<pkv::v1::GenerateRequest> pinned = requests;
  const std::string session = SessionOn(*cluster, 0);
  for (size_t i = 0; i < pinned.size(); i += 2) pinned[i].set_session_id(session);
  std::vector<Outcome> outcomes;
  std::thread clients(
      [&] { outcomes = RunConcurrently(*cluster, pinned, kStreamDeadline, controls); });
  ASSERT_TRUE(WaitFor([&] { return started.load() == static_cast<int>(requests.size()); },
                      absl::Seconds(30)));
  // Every stream is mid-decode (8 of 60 tokens): W0's sequences are exactly its share.
  const double on_w0 = SumOverWorkers(*cluster, {0}, "pkv_requests{state=\"running\"}") +
                       SumOverWorkers(*cluster, {0}, "pkv_requests{state=\"waiting\"}");
  cluster->worker(0).process->Signal(SIGKILL);
  clients.join();

  int migrated = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    ExpectSameAsReference(outcomes[i], reference[i], absl::StrCat("stream ", i));
    migrated += outcomes[i].complete.migrations() == 1;
    EXPECT_LE(outcomes[i].complete.migrations(), 1u);
    EXPECT_EQ(outcomes[i].complete.worker_id(), cluster->worker(1).id) << "W0 is dead";
  }
  EXPECT_GE(on_w0, 1) << "the kill must interrupt something";
  EXPECT_EQ(migrated, on_w0);
  EXPECT_EQ(RouterSample(*cluster, "pkv_router_migrations_total{phase=\"mid_stream\"}") -
                migrations_before,
            on_w0);
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(1), absl::Seconds(10)).ok());
}

// F1b: the kill hits requests queued on W0 and one in a long chunked prefill. Nothing was emitted
// for them, so they move transparently (before_first_token) and complete exactly; requests sent
// after the kill (the idle phase) see no error.
TEST(MigrationTest, KillWhileQueuedAndDuringPrefillFailsOverTransparently) {
  // Prefix caching off: the reference run below may land on W0, and with its 400-token prompt
  // cached the "long prefill" would be one chunk and the kill would miss it.
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:40", "--max_running=1",
                                  "--max_batch_tokens=16", "--prefix_caching=false"});
  ASSERT_NE(cluster, nullptr);
  const std::string session = SessionOn(*cluster, 0);
  ASSERT_FALSE(session.empty());
  std::vector<pkv::v1::GenerateRequest> requests = {GreedyRequest(100, 400, 8)};  // long prefill
  for (int i = 1; i <= 3; ++i) requests.push_back(GreedyRequest(100 + i, 10, 8));
  const std::vector<Outcome> reference = References(*cluster, requests);
  for (auto& r : requests) r.set_session_id(session);  // all on W0: one runs, three queue
  const double before_first =
      RouterSample(*cluster, "pkv_router_migrations_total{phase=\"before_first_token\"}");
  const double prefill_before = SumOverWorkers(*cluster, {0}, "pkv_prefill_tokens_total");

  // The long prompt first (it runs, prefilling 16 tokens a step), then three that queue behind it.
  std::vector<Outcome> outcomes(requests.size());
  std::vector<std::thread> clients;
  auto launch = [&](size_t i) {
    clients.emplace_back([&, i] {
      auto stub = NewRouterStub(*cluster);
      outcomes[i] = Stream(stub.get(), requests[i], kStreamDeadline);
    });
  };
  auto prefilled = [&] {
    return SumOverWorkers(*cluster, {0}, "pkv_prefill_tokens_total") - prefill_before;
  };
  launch(0);
  ASSERT_TRUE(WaitFor([&] { return prefilled() >= 16; }, absl::Seconds(20)));
  for (size_t i = 1; i < requests.size(); ++i) launch(i);
  ASSERT_TRUE(
      WaitFor([&] { return SumOverWorkers(*cluster, {0}, "pkv_requests{state=\"waiting\"}") == 3; },
              absl::Seconds(20)));
  const double prefilled_at_kill = prefilled();
  cluster->worker(0).process->Signal(SIGKILL);
  for (auto& t : clients) t.join();
  EXPECT_LT(prefilled_at_kill, 400) << "the kill must land during the prefill";
  for (size_t i = 0; i < requests.size(); ++i) {
    ExpectSameAsReference(outcomes[i], reference[i], absl::StrCat("request ", i));
    EXPECT_EQ(outcomes[i].complete.migrations(), 0u) << "moved before its first token";
  }
  EXPECT_EQ(RouterSample(*cluster, "pkv_router_migrations_total{phase=\"before_first_token\"}") -
                before_first,
            4);
  // Idle phase: W0 stays dead; new requests (same session) go to W1 without an error.
  const std::vector<Outcome> after = RunConcurrently(*cluster, requests, kStreamDeadline);
  for (size_t i = 0; i < after.size(); ++i) {
    ExpectSameAsReference(after[i], reference[i], absl::StrCat("after the kill ", i));
  }
}

// F7: W0 is killed and restarted three times under continuous load. Streams on it move (no
// client error), each kill ejects it, and after the last restart it is readmitted and placed on.
TEST(MigrationTest, FlappingWorkerIsEjectedAndReadmitted) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:10"},
                              {"--eject_base=200ms", "--eject_max=800ms"});
  ASSERT_NE(cluster, nullptr);
  std::vector<pkv::v1::GenerateRequest> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(GreedyRequest(200 + i, 12, 30));
  const std::vector<Outcome> reference = References(*cluster, prompts);
  const double ejections_before = RouterSample(*cluster, "pkv_router_worker_ejections_total");

  std::atomic<bool> stop{false};
  std::atomic<int> done{0}, bad{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      auto stub = NewRouterStub(*cluster);
      for (int n = 0; !stop.load(); ++n) {
        const size_t k = (c + n) % prompts.size();
        const Outcome o = Stream(stub.get(), prompts[k], kStreamDeadline);
        if (!o.status.ok() || o.tokens != reference[k].tokens) {
          ++bad;
          ADD_FAILURE() << "client " << c << ": " << o.status.error_message();
        }
        ++done;
      }
    });
  }
  const std::string w0_placements = absl::StrCat("pkv_router_worker_placements_total{worker=\"",
                                                 cluster->worker(0).address(), "\"}");
  for (int round = 0; round < 3; ++round) {
    // Long enough for the breaker (ejections of at most 0.8 s here) to have readmitted W0 since
    // the last restart, so each kill is a new ejection.
    absl::SleepFor(absl::Milliseconds(1500));
    cluster->worker(0).process->Signal(SIGKILL);
    absl::SleepFor(absl::Milliseconds(500));
    ASSERT_TRUE(cluster->RestartWorker(0, {"--test_fault=slow_step_ms:10"}).ok());
  }
  // After the last restart W0 is readmitted (its breaker's probe) and gets placements again.
  const double placed = RouterSample(*cluster, w0_placements);
  EXPECT_TRUE(
      WaitFor([&] { return RouterSample(*cluster, w0_placements) > placed; }, absl::Seconds(15)));
  stop.store(true);
  for (auto& t : clients) t.join();
  EXPECT_EQ(bad.load(), 0) << "of " << done.load() << " streams";
  EXPECT_GE(RouterSample(*cluster, "pkv_router_worker_ejections_total") - ejections_before, 3);
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(0), absl::Seconds(10)).ok());
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(1), absl::Seconds(10)).ok());
}

}  // namespace
}  // namespace pkv::testing
