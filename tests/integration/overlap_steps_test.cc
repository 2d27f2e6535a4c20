// Step pipelining end to end (--overlap_steps, engine.h): a worker that launches step N+1 before
// step N has finished must stream exactly what the unpipelined worker streams, because the CPU
// backend is batch invariant and a sequence's extra step after it stops is dropped. Exercised
// under what moves sequences around between steps: concurrent requests, chunked prefill
// (--max_batch_tokens), preemption in a small KV pool, shared prefixes (the prefix cache), stop
// token ids, seeded sampling and log-probabilities; then the pool must be whole at idle.
#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

StreamResult Stream(const Cluster& cluster, const pkv::v1::GenerateRequest& req) {
  return RunGenerate(cluster.RouterStub().get(), req, absl::Seconds(120));
}

std::vector<StreamResult> RunConcurrently(const Cluster& cluster,
                                          const std::vector<pkv::v1::GenerateRequest>& reqs) {
  std::vector<StreamResult> out(reqs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = Stream(cluster, reqs[i]); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// Ten requests: prompts of 20-110 tokens (four share a 48-token prefix), 24-40 tokens each,
// greedy and seeded, all with log-probabilities.
std::vector<pkv::v1::GenerateRequest> Workload() {
  std::vector<pkv::v1::GenerateRequest> reqs;
  const pkv::v1::GenerateRequest shared = GreedyRequest(99, 48, 1);
  for (int i = 0; i < 10; ++i) {
    const int prompt_len = 20 + 10 * i;
    const uint32_t max_tokens = 24 + 4 * static_cast<uint32_t>(i % 5);
    pkv::v1::GenerateRequest r = i % 2 == 0 ? GreedyRequest(i, prompt_len, max_tokens)
                                            : SeededRequest(i, prompt_len, max_tokens, 7 + i);
    if (i < 4) {  // the shared prefix, then the request's own tokens
      std::vector<uint32_t> ids(shared.token_ids().ids().begin(), shared.token_ids().ids().end());
      ids.insert(ids.end(), r.token_ids().ids().begin(), r.token_ids().ids().end());
      r.mutable_token_ids()->clear_ids();
      for (uint32_t id : ids) r.mutable_token_ids()->add_ids(id);
    }
    r.set_request_id(absl::StrCat("overlap-", i));
    r.mutable_sampling()->set_logprobs(true);
    reqs.push_back(r);
  }
  return reqs;
}

TEST(OverlapStepsTest, PipelinedWorkerStreamsWhatTheSerialWorkerStreams) {
  // A pool of 24 pages of 16 tokens holds about four of the requests at once, so the batch
  // preempts and recomputes; prefill runs in chunks of at most 48 tokens.
  ClusterOptions serial_options;
  serial_options.num_workers = 1;
  serial_options.worker_args = {"--kv_pages=24", "--max_batch_tokens=48", "--max_model_len=256",
                                "--overlap_steps=off"};
  ClusterOptions pipelined_options = serial_options;
  pipelined_options.worker_args.back() = "--overlap_steps=on";  // the CPU backend's auto is off
  auto serial = Cluster::Start(serial_options);
  ASSERT_TRUE(serial.ok()) << serial.status();
  auto pipelined = Cluster::Start(pipelined_options);
  ASSERT_TRUE(pipelined.ok()) << pipelined.status();

  // Stop ids from each seeded request's own reference output (alone on the serial worker), so
  // they stop early: the first token from the 3rd on that did not come before (greedy, the tiny
  // model repeats one token).
  std::vector<pkv::v1::GenerateRequest> reqs = Workload();
  for (size_t i = 1; i < reqs.size(); i += 2) {
    const StreamResult alone = Stream(**serial, reqs[i]);
    ASSERT_TRUE(alone.status.ok()) << alone.status.error_message() << (*serial)->Logs();
    for (size_t k = 2; k < alone.token_ids.size(); ++k) {
      const auto before = alone.token_ids.begin() + static_cast<std::ptrdiff_t>(k);
      if (std::find(alone.token_ids.begin(), before, alone.token_ids[k]) != before) continue;
      reqs[i].mutable_sampling()->add_stop_token_ids(alone.token_ids[k]);
      break;
    }
  }
  auto metric = [&](Cluster& c, const char* name) {
    const double v = ScrapeMetric(c.worker(0).metrics_address(), name);
    return std::isnan(v) ? 0.0 : v;
  };
  auto preemptions = [&] { return metric(**pipelined, "pkv_preemptions_total"); };
  const double preemptions_before = preemptions();
  const std::vector<StreamResult> want = RunConcurrently(**serial, reqs);
  const std::vector<StreamResult> got = RunConcurrently(**pipelined, reqs);
  int stopped = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    ASSERT_TRUE(want[i].status.ok()) << want[i].status.error_message() << (*serial)->Logs();
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.error_message() << (*pipelined)->Logs();
    ASSERT_TRUE(got[i].completed);
    EXPECT_EQ(got[i].token_ids, want[i].token_ids);
    EXPECT_EQ(got[i].complete.finish_reason(), want[i].complete.finish_reason());
    EXPECT_EQ(got[i].complete.completion_tokens(), want[i].complete.completion_tokens());
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (size_t k = 0; k < got[i].logprobs.size(); ++k) {
      EXPECT_NEAR(got[i].logprobs[k], want[i].logprobs[k], 1e-5) << "logprob " << k;
    }
    stopped += got[i].complete.finish_reason() == pkv::v1::FINISH_REASON_STOP;
  }
  EXPECT_GE(stopped, 3) << "the stop ids must end requests early";
  // The workload did preempt on the pipelined worker (pages taken back while a step ran).
  EXPECT_GT(preemptions(), preemptions_before);
  // The pipelined worker computes a token in vain for a request that stops early when its next
  // step was launched before the stop was seen (not when the sequence was preempted meanwhile), so
  // at least one here and never more than the early stops; counted when that step finishes, which
  // may be after the client saw the stop. The serial worker never does.
  double discarded = 0;
  for (int i = 0; i < 100 && discarded < 1; ++i) {
    discarded = metric(**pipelined, "pkv_tokens_discarded_total");
    if (discarded < 1) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GE(discarded, 1);
  EXPECT_LE(discarded, stopped);
  EXPECT_EQ(metric(**serial, "pkv_tokens_discarded_total"), 0);
  const absl::Status quiescent = WaitWorkerQuiescent((*pipelined)->worker(0), absl::Seconds(10));
  EXPECT_TRUE(quiescent.ok()) << quiescent;
}

}  // namespace
}  // namespace pkv::testing
