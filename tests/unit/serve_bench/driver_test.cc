// The load driver against an in-process fake worker (tests/unit/router/fake_worker.h, served over
// loopback gRPC as pkv.v1.Worker): what it sends, what it records, its bounds. Only lower bounds
// on time are asserted (a loaded machine may be slower, never faster).
#include "bench/serve/driver.h"

#include <algorithm>
#include <set>

#include "bench/serve/stats.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/unit/router/fake_worker.h"

namespace pkv::serve_bench {
namespace {

using pkv::router::testing::FakeScript;
using pkv::router::testing::FakeWorker;

class ServeBenchDriverTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_.Start(); }
  void TearDown() override { fake_.Stop(); }

  LoadOptions Options() {
    LoadOptions o;
    o.target = Target::kWorker;
    o.channel = grpc::CreateChannel(fake_.address(), grpc::InsecureChannelCredentials());
    o.request_timeout = absl::Seconds(30);
    o.request_id_prefix = "t";
    return o;
  }

  static WorkloadOptions Sharegpt() {
    WorkloadOptions w;
    w.seed = 9;
    w.vocab_size = 512;
    w.max_context = 512;
    w.input = {16, 0.5, 1 << 20};
    w.output = {4, 0, 1 << 20};
    return w;
  }

  FakeWorker fake_{"fake-0"};
};

// Most streams alive at once, from the records' [send, end] intervals.
int MaxOverlap(const std::vector<RequestRecord>& records) {
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : records) {
    events.push_back({r.send_s, +1});
    events.push_back({r.end_s, -1});
  }
  std::sort(events.begin(), events.end());  // an end before a send at the same instant
  int now = 0, most = 0;
  for (const auto& e : events) most = std::max(most, now += e.second);
  return most;
}

TEST_F(ServeBenchDriverTest, ClosedLoopKeepsConcurrencyAndSendsTheWorkload) {
  fake_.SetScript([](int) {
    FakeScript s;
    s.chunks = 4;
    s.chunk_interval = absl::Milliseconds(5);
    return s;
  });
  LoadOptions o = Options();
  o.concurrency = 3;
  o.num_requests = 30;
  auto workload = MakeWorkload(Sharegpt());
  ASSERT_TRUE(workload.ok());
  auto reference = MakeWorkload(Sharegpt());  // the same seed: the same prompts
  const std::vector<RequestRecord> records = RunLoad(o, **workload);

  ASSERT_EQ(records.size(), 30u);
  EXPECT_LE(MaxOverlap(records), 3);
  const std::vector<pkv::v1::WorkerGenerateRequest> seen = fake_.requests();
  ASSERT_EQ(seen.size(), 30u);
  std::set<std::string> ids;
  for (const auto& w : seen) ids.insert(w.request().request_id());
  EXPECT_EQ(ids.size(), 30u);
  for (int i = 0; i < 30; ++i) {  // sent in order t-0, t-1, ...; find each by its id
    const RequestSpec spec = *(*reference)->Next();
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& w) {
      return w.request().request_id() == "t-" + std::to_string(i);
    });
    ASSERT_NE(it, seen.end());
    const auto& sent = it->request().token_ids().ids();
    EXPECT_EQ(std::vector<uint32_t>(sent.begin(), sent.end()), spec.prompt);
    EXPECT_TRUE(it->request().sampling().ignore_eos());
    EXPECT_EQ(it->request().sampling().max_tokens(), spec.max_tokens);
  }
  for (const RequestRecord& r : records) {
    EXPECT_TRUE(r.ok()) << r.error_message;
    EXPECT_EQ(r.tokens_received, 4);
    EXPECT_EQ(r.completion_tokens, 4u);
    EXPECT_EQ(r.prompt_tokens, r.prompt_len);
    EXPECT_GE(r.ttft_s(), 0.005);  // the fake sleeps before its first chunk
    EXPECT_GE(r.e2e_s(), 0.020);
    EXPECT_LE(r.first_token_s, r.end_s);
  }
}

TEST_F(ServeBenchDriverTest, OpenLoopKeepsTheScheduleAndCountsErrors) {
  fake_.SetScript([](int i) {
    FakeScript s;
    s.chunks = 1;
    if (i % 4 == 0) s.refuse = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
    return s;
  });
  LoadOptions o = Options();
  o.request_rate = 200;
  o.arrival = ArrivalKind::kConstant;
  o.num_requests = 20;
  int progress_calls = 0;
  LoadProgress last;
  o.progress = [&](const LoadProgress& p) {
    ++progress_calls;
    last = p;
  };
  auto workload = MakeWorkload(Sharegpt());
  const std::vector<RequestRecord> records = RunLoad(o, **workload);
  ASSERT_EQ(records.size(), 20u);
  for (const RequestRecord& r : records) {
    EXPECT_GE(r.send_s, (r.index + 1) / 200.0 - 1e-9) << r.index;  // never ahead of schedule
  }
  const RunStats stats = ComputeStats(records, Slo{});
  EXPECT_EQ(stats.errors_by_code.at("RESOURCE_EXHAUSTED"), 5);
  EXPECT_EQ(stats.ok, 15);
  EXPECT_GE(progress_calls, 1);
  EXPECT_EQ(last.finished, 20);
  EXPECT_EQ(last.in_flight, 0);
}

TEST_F(ServeBenchDriverTest, MultiTurnResendsTheRepliesItReceived) {
  LoadOptions o = Options();
  o.concurrency = 1;
  o.num_requests = 3;
  WorkloadOptions w = Sharegpt();
  w.kind = WorkloadKind::kMultiTurn;
  w.turns = 3;
  auto workload = MakeWorkload(w);
  RunLoad(o, **workload);
  const auto seen = fake_.requests();
  ASSERT_EQ(seen.size(), 3u);
  for (int turn = 1; turn < 3; ++turn) {
    const auto& prev = seen[turn - 1].request().token_ids().ids();
    const auto& cur = seen[turn].request().token_ids().ids();
    std::vector<uint32_t> history(prev.begin(), prev.end());
    const std::vector<uint32_t> reply = fake_.sent_tokens(turn - 1);
    history.insert(history.end(), reply.begin(), reply.end());
    ASSERT_GT(cur.size(), history.size());
    EXPECT_TRUE(std::equal(history.begin(), history.end(), cur.begin())) << turn;
    EXPECT_EQ(seen[turn].request().session_id(), seen[0].request().session_id());
  }
}

}  // namespace
}  // namespace pkv::serve_bench
