// The router convicts a worker only of the worker's own failures (issue "a router that never blames
// a healthy worker"), through real processes on loopback:
//   - the router itself paused (SIGSTOP) for 5 s while 16 streams run: no ejection, no failed
//     stream, exactly the uninterrupted outputs (its stall timer fires late; the worker's answer
//     to the progress check shows the tokens were on their way);
//   - Generation.Abort of live streams in a loop while another client streams: each aborted
//     stream ends CANCELLED before its end, no worker is ejected or migrated from, the other
//     client sees no failure, and the workers end with every page free;
//   - both workers killed after tokens were sent: ABORTED with the tokens-emitted trailer;
//   - maximal deadlines (grpc-timeout 2562047H, what grpc-go sends for its largest duration, and
//     99999999H, the largest the spec allows) are served, not read as expired.
// Workers sleep slow_step_ms per step so streams last long enough; nothing here asserts a speed.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpc/support/time.h"
#include "gtest/gtest.h"
#include "pkv/v1/generation.pb.h"
#include "tests/harness/cluster.h"
#include "tests/harness/raw_h2_client.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

constexpr char kEjections[] = "pkv_router_worker_ejections_total";
constexpr char kMidStreamMigrations[] = "pkv_router_migrations_total{phase=\"mid_stream\"}";

// Streams run concurrently through the router on a background thread; the test waits until each
// has received `tokens` tokens, injects its fault, then collects the outcomes (joined on
// destruction too, so a failed assertion never leaves the thread running).
class StreamsInFlight {
 public:
  StreamsInFlight(const Cluster& cluster, std::vector<pkv::v1::GenerateRequest> requests,
                  int tokens)
      : controls_(requests.size()) {
    for (auto& c : controls_) {
      c.on_progress = [this, tokens](int got) {
        if (got == tokens) started_.fetch_add(1);
      };
    }
    thread_ = std::thread([this, &cluster, requests = std::move(requests)] {
      outcomes_ = RunConcurrently(cluster, requests, kStreamDeadline, controls_);
    });
  }
  ~StreamsInFlight() { Join(); }
  bool WaitAllStarted() {
    return WaitFor([&] { return started_.load() == static_cast<int>(controls_.size()); },
                   absl::Seconds(30));
  }
  const std::vector<Outcome>& Join() {
    if (thread_.joinable()) thread_.join();
    return outcomes_;
  }

 private:
  std::vector<StreamControl> controls_;
  std::atomic<int> started_{0};
  std::vector<Outcome> outcomes_;
  std::thread thread_;
};

// Router SIGSTOP: the pause is longer than the stall timeout (3 s), which is the point.
TEST(JudgementTest, PausedRouterEjectsNoHealthyWorker) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:20"});
  ASSERT_NE(cluster, nullptr);
  std::vector<pkv::v1::GenerateRequest> requests;
  for (int i = 0; i < 16; ++i) {
    // 400 tokens at >= 20 ms a step: the workers are still generating when the router resumes.
    requests.push_back(i % 2 == 0 ? GreedyRequest(100 + i, 6 + i, 400)
                                  : SeededRequest(100 + i, 6 + i, 400, 7000 + i));
  }
  const std::vector<Outcome> reference = References(*cluster, requests);
  const double ejections0 = RouterSample(*cluster, kEjections);

  StreamsInFlight streams(*cluster, requests, /*tokens=*/4);
  ASSERT_TRUE(streams.WaitAllStarted());
  EXPECT_TRUE(cluster->router().Freeze());
  absl::SleepFor(absl::Seconds(5));
  cluster->router().Signal(SIGCONT);
  const std::vector<Outcome>& outcomes = streams.Join();

  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string what = absl::StrCat("stream ", i);
    EXPECT_TRUE(outcomes[i].status.ok()) << what << ": " << outcomes[i].status.error_message();
    EXPECT_EQ(outcomes[i].tokens, reference[i].tokens) << what;
    EXPECT_EQ(outcomes[i].text, reference[i].text) << what;
  }
  EXPECT_EQ(RouterSample(*cluster, kEjections) - ejections0, 0) << cluster->Logs();
  // Whether the late stall timers ran before the backlog of tokens was read depends on the
  // scheduler; the checks' verdicts are printed, and none may convict.
  const std::string checks = "pkv_router_stall_checks_total{verdict=";
  std::printf("[paused router] stall checks: progress %.0f, waiting %.0f, convicted %.0f\n",
              RouterSample(*cluster, checks + "\"progress\"}"),
              RouterSample(*cluster, checks + "\"waiting\"}"),
              RouterSample(*cluster, checks + "\"convicted\"}"));
  EXPECT_EQ(RouterSample(*cluster, checks + "\"convicted\"}"), 0);
  for (int w = 0; w < 2; ++w) {
    const absl::Status quiet = WaitWorkerQuiescent(cluster->worker(w), absl::Seconds(10));
    EXPECT_TRUE(quiet.ok()) << "worker " << w << ": " << quiet;
  }
}

// One client aborts its own live streams, one after another; another client streams meanwhile.
TEST(JudgementTest, AbortStopsTheStreamAndBlamesNoWorker) {
  constexpr int kAborts = 12;
  constexpr uint32_t kLongStream = 900;  // at 20 ms a step: 18 s, far longer than an abort
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:20"});
  ASSERT_NE(cluster, nullptr);
  const double ejections0 = RouterSample(*cluster, kEjections);
  const double migrations0 = RouterSample(*cluster, kMidStreamMigrations);
  const std::string cancels = "pkv_seq_aborts_total{reason=\"client_cancel\"}";
  const double cancels0 = SumOverWorkers(*cluster, {0, 1}, cancels);

  std::atomic<bool> stop{false};
  std::atomic<int> other_requests{0};
  std::atomic<int> other_failures{0};
  std::string other_failure;
  std::thread other([&] {
    auto stub = NewRouterStub(*cluster);
    for (int i = 0; !stop.load(); ++i) {
      const Outcome out = Stream(stub.get(), GreedyRequest(500 + i, 6, 16), kStreamDeadline);
      other_requests.fetch_add(1);
      if (!out.status.ok() || out.tokens.size() != 16) {
        if (other_failures.fetch_add(1) == 0) {
          other_failure = absl::StrCat(out.status.error_code(), " ", out.status.error_message());
        }
      }
    }
  });

  auto stub = NewRouterStub(*cluster);
  for (int i = 0; i < kAborts; ++i) {
    pkv::v1::GenerateRequest request = GreedyRequest(900 + i, 8, kLongStream);
    const std::string id = absl::StrCat("abort-me-", i);
    request.set_request_id(id);
    std::atomic<bool> streaming{false};
    StreamControl control;
    control.on_progress = [&streaming](int tokens) {
      if (tokens >= 2) streaming.store(true);
    };
    Outcome aborted;
    std::atomic<bool> ended{false};
    std::thread client([&] {
      aborted = Stream(stub.get(), request, kStreamDeadline, control);
      ended.store(true);
    });
    EXPECT_TRUE(WaitFor([&] { return streaming.load() || ended.load(); }, absl::Seconds(30)));
    pkv::v1::AbortRequest abort;
    abort.set_request_id(id);
    pkv::v1::AbortResponse answer;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status status = stub->Abort(&ctx, abort, &answer);
    client.join();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(answer.found()) << id;
    EXPECT_EQ(aborted.status.error_code(), grpc::StatusCode::CANCELLED)
        << id << ": " << aborted.status.error_message();
    EXPECT_LT(aborted.tokens.size(), kLongStream) << id << " ran to its end: Abort stopped nothing";
    EXPECT_FALSE(aborted.completed) << id;
  }
  stop.store(true);
  other.join();

  EXPECT_GT(other_requests.load(), 0);
  EXPECT_EQ(other_failures.load(), 0) << other_failure;
  EXPECT_EQ(RouterSample(*cluster, kEjections) - ejections0, 0) << cluster->Logs();
  EXPECT_EQ(RouterSample(*cluster, kMidStreamMigrations) - migrations0, 0);
  // Each aborted stream was cancelled at its worker (and its pages freed: quiescence below).
  EXPECT_TRUE(WaitFor(
      [&] {
        return SumOverWorkers(*cluster, {0, 1}, cancels) - cancels0 >= kAborts;
      },
      absl::Seconds(10)))
      << SumOverWorkers(*cluster, {0, 1}, cancels) - cancels0 << " worker-side cancels";
  for (int w = 0; w < 2; ++w) {
    const absl::Status quiet = WaitWorkerQuiescent(cluster->worker(w), absl::Seconds(10));
    EXPECT_TRUE(quiet.ok()) << "worker " << w << ": " << quiet;
  }
}

// Both workers lost 500 ms apart after tokens were sent: migration has nowhere to go, and the
// client learns how many of its tokens are valid.
TEST(JudgementTest, BothWorkersLostAfterTokensEndsAbortedWithTokensEmitted) {
  auto cluster = StartCluster(2, {"--test_fault=slow_step_ms:20"});
  ASSERT_NE(cluster, nullptr);
  std::vector<pkv::v1::GenerateRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(GreedyRequest(300 + i, 6 + i, 1000));
  StreamsInFlight streams(*cluster, requests, /*tokens=*/8);
  ASSERT_TRUE(streams.WaitAllStarted());
  cluster->worker(0).process->Signal(SIGKILL);
  absl::SleepFor(absl::Milliseconds(500));
  cluster->worker(1).process->Signal(SIGKILL);
  const std::vector<Outcome>& outcomes = streams.Join();

  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& out = outcomes[i];
    const std::string what = absl::StrCat("stream ", i, ": ", out.status.error_message());
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::ABORTED) << what;
    auto trailer = out.trailers.find("tokens-emitted");
    ASSERT_NE(trailer, out.trailers.end()) << what;
    EXPECT_EQ(trailer->second, std::to_string(out.tokens.size())) << what;
    EXPECT_GE(out.tokens.size(), 8u) << what;
  }
}

// The largest grpc-timeout values, sent verbatim on a hand-written HTTP/2 stream: the stream must
// be served to its Complete.
TEST(JudgementTest, MaximalDeadlinesAreServed) {
  auto cluster = StartCluster(1, {});
  ASSERT_NE(cluster, nullptr);
  const std::string address = cluster->router_address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  for (const std::string timeout : {"2562047H", "99999999H"}) {
    auto client = RawH2Client::Connect(port, absl::Seconds(5));
    ASSERT_TRUE(client.ok()) << client.status();
    const std::string headers = GrpcRequestHeaderBlock("/pkv.v1.Generation/Generate", "127.0.0.1",
                                                       {{"grpc-timeout", timeout}});
    const std::string data = GrpcLengthPrefixed(GreedyRequest(42, 6, 8).SerializeAsString());
    ASSERT_TRUE((*client)
                    ->Send(EncodeH2Frame(H2Type::kHeaders, kH2FlagEndHeaders, 1, headers) +
                           EncodeH2Frame(H2Type::kData, kH2FlagEndStream, 1, data))
                    .ok());
    // Reassemble the stream's DATA into gRPC messages until a Complete or the stream ends.
    std::string bytes;
    bool completed = false, ended = false;
    int tokens = 0;
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (!completed && !ended && absl::Now() < until) {
      absl::StatusOr<H2Frame> frame = (*client)->ReadFrame(until - absl::Now());
      ASSERT_TRUE(frame.ok()) << timeout << ": " << frame.status();
      if (frame->stream_id != 1) continue;
      if (frame->type == static_cast<uint8_t>(H2Type::kData)) bytes += frame->payload;
      ended = (frame->flags & kH2FlagEndStream) != 0 ||
              frame->type == static_cast<uint8_t>(H2Type::kRstStream);
      while (bytes.size() >= 5) {
        const uint32_t len = (static_cast<uint32_t>(static_cast<uint8_t>(bytes[1])) << 24) |
                             (static_cast<uint32_t>(static_cast<uint8_t>(bytes[2])) << 16) |
                             (static_cast<uint32_t>(static_cast<uint8_t>(bytes[3])) << 8) |
                             static_cast<uint8_t>(bytes[4]);
        if (bytes.size() < 5 + len) break;
        pkv::v1::GenerateResponse response;
        ASSERT_TRUE(response.ParseFromString(bytes.substr(5, len)));
        bytes.erase(0, 5 + len);
        if (response.has_chunk()) tokens += response.chunk().token_ids_size();
        completed = completed || response.has_complete();
      }
    }
    EXPECT_TRUE(completed) << "grpc-timeout " << timeout << " was not served to its end (" << tokens
                           << " tokens)";
    EXPECT_EQ(tokens, 8) << timeout;
  }
  // A deadline 250 years ahead, past what std::chrono::system_clock holds (grpc-js clients send
  // such deadlines too), set as a gpr_timespec.
  auto stub = NewRouterStub(*cluster);
  grpc::ClientContext ctx;
  ctx.set_deadline(
      gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                   gpr_time_from_seconds(int64_t{250} * 365 * 24 * 3600, GPR_TIMESPAN)));
  ctx.set_wait_for_ready(true);
  auto reader = stub->Generate(&ctx, GreedyRequest(43, 6, 8));
  pkv::v1::GenerateResponse response;
  int tokens = 0;
  while (reader->Read(&response)) {
    if (response.has_chunk()) tokens += response.chunk().token_ids_size();
  }
  const grpc::Status far = reader->Finish();
  EXPECT_TRUE(far.ok()) << far.error_message();
  EXPECT_EQ(tokens, 8);
}

}  // namespace
}  // namespace pkv::testing
