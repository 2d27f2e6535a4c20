// pkv-colocated (colocated/): the router and one worker in one process, the router calling that
// worker's engine directly (by default; over gRPC's in-process transport with
// --router_direct=false), a remote pkv-worker beside it; clients over loopback gRPC. A generation
// on the in-process worker, cancel, deadline and a client that vanishes mid-stream (its KV pages
// and slots come back), its own port still serving pkv.v1.Worker, router and worker metrics on one
// /metrics, a drain (SIGTERM) that lets a running stream finish and exits 0, and the in-process
// gRPC path still serving.
#include <csignal>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"

namespace pkv::testing {
namespace {

constexpr char kInProcessId[] = "wc";

// One pkv-colocated process on fresh ports (the in-process worker's id is kInProcessId).
struct Colocated {
  int worker_port = 0, metrics_port = 0, router_port = 0;
  std::unique_ptr<Process> process;
  std::string router_address() const { return absl::StrCat("127.0.0.1:", router_port); }
  std::string worker_address() const { return absl::StrCat("127.0.0.1:", worker_port); }
  std::string metrics_address() const { return absl::StrCat("127.0.0.1:", metrics_port); }
};

absl::StatusOr<Colocated> StartColocated(const std::string& model_dir, const std::string& log_dir,
                                         const std::vector<std::string>& remote_workers,
                                         const std::vector<std::string>& extra_args = {}) {
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {  // a port taken meanwhile: fresh ports
    Colocated c;
    c.worker_port = PickFreePort();
    c.metrics_port = PickFreePort();
    c.router_port = PickFreePort();
    std::vector<std::string> args = {absl::StrCat("--listen=", c.worker_address()),
                                     absl::StrCat("--metrics_listen=", c.metrics_address()),
                                     absl::StrCat("--worker_id=", kInProcessId),
                                     absl::StrCat("--model=", model_dir),
                                     "--backend=cpu",
                                     "--insecure",
                                     "--drain_timeout=30s",
                                     absl::StrCat("--router_listen=", c.router_address())};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    if (!remote_workers.empty()) {
      std::string list;
      for (const std::string& w : remote_workers)
        absl::StrAppend(&list, list.empty() ? "" : ",", w);
      args.push_back(absl::StrCat("--router_workers=", list));
    }
    auto p = Process::Spawn(BinDir() + "/pkv-colocated", args,
                            absl::StrCat(log_dir, "/colocated-", attempt, ".log"));
    if (!p.ok()) return p.status();
    c.process = std::move(*p);
    last = WaitServing(c.router_address(), absl::Seconds(60), "pkv.v1.Generation");
    // The router serves once any worker is healthy: wait for all of them (the in-process one too).
    const double expected = 1.0 + static_cast<double>(remote_workers.size());
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (last.ok() &&
           ScrapeMetric(c.metrics_address(), "pkv_router_workers{state=\"healthy\"}") != expected) {
      if (absl::Now() > deadline) last = absl::DeadlineExceededError("workers not all healthy");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (last.ok()) return c;
    last = absl::Status(last.code(), absl::StrCat(last.message(), "\n", c.process->LogTail()));
    if (c.process->Running()) return last;
  }
  return last;
}

class ColocatedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.num_workers = 1;  // the remote worker beside the in-process one
    options.start_router = false;
    auto c = Cluster::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    remote_ = c->release();
    // Steps of at least 5 ms: a 1000-token stream lasts seconds, so a cancel, deadline or
    // disconnect lands mid-stream and must be what ends it (the abort counters say so).
    auto colocated =
        StartColocated(remote_->model_dir(), remote_->log_dir(), {remote_->worker(0).address()},
                       {"--enable_test_faults", "--test_fault=slow_step_ms:5"});
    ASSERT_TRUE(colocated.ok()) << colocated.status();
    colocated_ = new Colocated(*std::move(colocated));
  }
  static void TearDownTestSuite() {
    delete colocated_;
    colocated_ = nullptr;
    delete remote_;
    remote_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(colocated_, nullptr);
    stub_ = pkv::v1::Generation::NewStub(
        grpc::CreateChannel(colocated_->router_address(), grpc::InsecureChannelCredentials()));
  }

  // A session id the router placed on the in-process worker (affinity keeps it there).
  std::optional<std::string> SessionOnInProcessWorker() {
    for (int k = 0; k < 64; ++k) {
      pkv::v1::GenerateRequest req = MakeRequest({3, 4, 5, static_cast<uint32_t>(k)}, 2);
      req.set_session_id(absl::StrCat("s", k));
      StreamResult r = RunGenerate(stub_.get(), req);
      if (!r.status.ok()) return std::nullopt;
      if (r.complete.worker_id() == kInProcessId) return req.session_id();
    }
    return std::nullopt;
  }

  // Waits until the in-process worker, asked on its own port, runs nothing and holds no pages.
  static void ExpectInProcessWorkerIdle() {
    auto stub = pkv::v1::Worker::NewStub(
        grpc::CreateChannel(colocated_->worker_address(), grpc::InsecureChannelCredentials()));
    pkv::v1::Load load;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    do {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      ASSERT_TRUE(stub->GetLoad(&ctx, {}, &load).ok());
      if (load.kv_pages_used() == 0 && load.running() + load.waiting() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (absl::Now() < deadline);
    EXPECT_EQ(load.kv_pages_used(), 0u);
    EXPECT_EQ(load.running() + load.waiting(), 0u);
  }

  // The in-process worker's pkv_seq_aborts_total{reason}.
  static double Aborts(const std::string& reason) {
    return ScrapeMetric(colocated_->metrics_address(),
                        absl::StrCat("pkv_seq_aborts_total{reason=\"", reason, "\"}"));
  }
  // The in-process worker counted one more abort for `reason` than `before` (polled: it lands
  // within a step of the cancel).
  static void ExpectOneMoreAbort(const std::string& reason, double before) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (Aborts(reason) < before + 1 && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(Aborts(reason), before + 1) << reason;
  }

  static Cluster* remote_;
  static Colocated* colocated_;
  std::unique_ptr<pkv::v1::Generation::Stub> stub_;
};

Cluster* ColocatedTest::remote_ = nullptr;
Colocated* ColocatedTest::colocated_ = nullptr;

TEST_F(ColocatedTest, GeneratesOnBothWorkersWithTheSameGreedyOutput) {
  const std::vector<uint32_t> prompt = {5, 17, 300, 42, 99, 7};
  std::set<std::string> workers;
  std::optional<std::vector<uint32_t>> first;
  for (int i = 0; i < 16; ++i) {
    pkv::v1::GenerateRequest req = MakeRequest(prompt, 12);
    req.mutable_sampling()->set_ignore_eos(true);
    StreamResult r = RunGenerate(stub_.get(), req);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message() << "\n"
                               << colocated_->process->LogTail();
    ASSERT_TRUE(r.completed);
    EXPECT_EQ(r.token_ids.size(), 12u);
    if (!first) first = r.token_ids;
    EXPECT_EQ(r.token_ids, *first) << "worker " << r.complete.worker_id();
    workers.insert(r.complete.worker_id());
    // Alternate prompts' tails so prefix routing does not pin every request to one worker.
    pkv::v1::GenerateRequest other = MakeRequest({7, 8, static_cast<uint32_t>(100 + i)}, 2);
    other.set_session_id(absl::StrCat("spread", i));
    StreamResult o = RunGenerate(stub_.get(), other);
    ASSERT_TRUE(o.status.ok()) << o.status.error_message();
    workers.insert(o.complete.worker_id());
  }
  EXPECT_TRUE(workers.count(kInProcessId)) << "no request ran on the in-process worker";
  EXPECT_TRUE(workers.count("w0")) << "no request ran on the remote worker";
}

TEST_F(ColocatedTest, OwnPortStillServesTheWorkerApi) {
  ASSERT_TRUE(WaitServing(colocated_->worker_address(), absl::Seconds(10), "pkv.v1.Worker").ok());
  auto stub = pkv::v1::Worker::NewStub(
      grpc::CreateChannel(colocated_->worker_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  pkv::v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&ctx, {}, &info).ok());
  EXPECT_GT(info.vocab_size(), 0u);
}

TEST_F(ColocatedTest, CancelReleasesTheInProcessWorker) {
  const std::optional<std::string> session = SessionOnInProcessWorker();
  ASSERT_TRUE(session.has_value()) << "no session was placed on the in-process worker";
  const double aborts_before = Aborts("client_cancel");
  pkv::v1::GenerateRequest req = MakeRequest({11, 12, 13, 14}, 1000);
  req.mutable_sampling()->set_ignore_eos(true);
  req.set_session_id(*session);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub_->Generate(&ctx, req);
  pkv::v1::GenerateResponse resp;
  int chunks = 0;
  while (chunks < 2 && reader->Read(&resp)) {
    if (resp.has_chunk()) ++chunks;
  }
  ASSERT_EQ(chunks, 2);
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectInProcessWorkerIdle();
  ExpectOneMoreAbort("client_cancel", aborts_before);
}

TEST_F(ColocatedTest, DeadlineEndsTheStreamAndReleasesTheInProcessWorker) {
  const std::optional<std::string> session = SessionOnInProcessWorker();
  ASSERT_TRUE(session.has_value()) << "no session was placed on the in-process worker";
  const double aborts_before = Aborts("deadline");
  pkv::v1::GenerateRequest req = MakeRequest({21, 22, 23}, 1000);
  req.mutable_sampling()->set_ignore_eos(true);
  req.set_session_id(*session);
  StreamResult r = RunGenerate(stub_.get(), req, absl::Milliseconds(100));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
  ExpectInProcessWorkerIdle();
  ExpectOneMoreAbort("deadline", aborts_before);
}

// A client process killed mid-stream (its connection closes, no cancel sent): the router's
// stream ends, the direct call cancels the engine's request, and the worker's pages come back.
TEST_F(ColocatedTest, ClientGoneMidStreamReleasesTheInProcessWorker) {
  const std::optional<std::string> session = SessionOnInProcessWorker();
  ASSERT_TRUE(session.has_value()) << "no session was placed on the in-process worker";
  const std::string m = colocated_->metrics_address();
  const double tokens_before = ScrapeMetric(m, "pkv_generated_tokens_total");
  const double aborts_before = Aborts("client_cancel");
  auto client = Process::Spawn(
      BinDir() + "/pkv",
      {"generate", absl::StrCat("--router=", colocated_->router_address()), "--token_ids=41,42,43",
       "--max_tokens=1000", "--ignore_eos", absl::StrCat("--session_id=", *session)},
      absl::StrCat(remote_->log_dir(), "/client-gone.log"));
  ASSERT_TRUE(client.ok()) << client.status();
  // Mid-stream: the in-process worker holds the request's pages and has produced tokens.
  auto mid_stream = [&] {
    return ScrapeMetric(m, "pkv_kv_cache_pages{state=\"used\"}") > 0 &&
           ScrapeMetric(m, "pkv_generated_tokens_total") >= tokens_before + 3;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && !mid_stream()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(mid_stream()) << (*client)->LogTail() << colocated_->process->LogTail();
  (*client)->Signal(SIGKILL);
  (*client)->Wait(absl::Seconds(10));
  ExpectInProcessWorkerIdle();
  ExpectOneMoreAbort("client_cancel", aborts_before);
}

TEST_F(ColocatedTest, RouterAndWorkerMetricsOnOneEndpoint) {
  const std::optional<std::string> session = SessionOnInProcessWorker();
  ASSERT_TRUE(session.has_value());
  const std::string m = colocated_->metrics_address();
  const std::string label = absl::StrCat("direct:", colocated_->worker_address());
  EXPECT_GE(
      ScrapeMetric(m, absl::StrCat("pkv_router_worker_placements_total{worker=\"", label, "\"}")),
      1);
  EXPECT_GE(ScrapeMetric(m, "pkv_generated_tokens_total"), 1);
  EXPECT_EQ(ScrapeMetric(m, "pkv_router_workers{state=\"healthy\"}"), 2);
}

// Its own process (not the suite's): SIGTERM drains the router, then the worker; a stream in
// flight finishes and the process exits 0.
TEST(ColocatedDrainTest, SigtermLetsARunningStreamFinishAndExitsZero) {
  const std::string log_dir = MakeTempDir("pkv-colocated-drain");
  auto colocated = StartColocated(TinyModelDir(), log_dir, {});
  ASSERT_TRUE(colocated.ok()) << colocated.status();
  auto stub = pkv::v1::Generation::NewStub(
      grpc::CreateChannel(colocated->router_address(), grpc::InsecureChannelCredentials()));
  pkv::v1::GenerateRequest req = MakeRequest({31, 32, 33}, 200);
  req.mutable_sampling()->set_ignore_eos(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&ctx, req);
  pkv::v1::GenerateResponse resp;
  int tokens = 0;
  bool completed = false;
  bool signalled = false;
  while (reader->Read(&resp)) {
    if (resp.has_chunk()) {
      tokens += resp.chunk().token_ids_size();
      if (!signalled) {
        colocated->process->Signal(SIGTERM);
        signalled = true;
      }
    }
    if (resp.has_complete()) completed = true;
  }
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message() << "\n" << colocated->process->LogTail();
  EXPECT_TRUE(completed);
  EXPECT_EQ(tokens, 200);
  const std::optional<int> code = colocated->process->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << "did not exit\n" << colocated->process->LogTail();
  EXPECT_EQ(*code, 0) << colocated->process->LogTail();
}

// The path before direct calls (--router_direct=false: Generate over the worker's in-process gRPC
// channel) still generates, and says so in its label.
TEST(ColocatedInProcessGrpcTest, GeneratesOverTheInProcessChannel) {
  const std::string log_dir = MakeTempDir("pkv-colocated-inproc");
  auto colocated = StartColocated(TinyModelDir(), log_dir, {}, {"--router_direct=false"});
  ASSERT_TRUE(colocated.ok()) << colocated.status();
  auto stub = pkv::v1::Generation::NewStub(
      grpc::CreateChannel(colocated->router_address(), grpc::InsecureChannelCredentials()));
  pkv::v1::GenerateRequest req = MakeRequest({5, 17, 300}, 6);
  req.mutable_sampling()->set_ignore_eos(true);
  StreamResult r = RunGenerate(stub.get(), req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << colocated->process->LogTail();
  EXPECT_EQ(r.token_ids.size(), 6u);
  EXPECT_EQ(r.complete.worker_id(), kInProcessId);
  const std::string label = absl::StrCat("inproc:", colocated->worker_address());
  EXPECT_EQ(
      ScrapeMetric(colocated->metrics_address(),
                   absl::StrCat("pkv_router_worker_placements_total{worker=\"", label, "\"}")),
      1);
}

}  // namespace
}  // namespace pkv::testing
