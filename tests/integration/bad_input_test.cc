// The bad-input table (RELIABILITY.md V, P, S3): real pkv-router + 2 pkv-worker processes on
// loopback. Every case's status code and message are asserted; afterwards the servers are still
// SERVING, the workers generated nothing for the rejected requests and their KV ledgers balance,
// and the router counted exactly the INVALID_ARGUMENT streams it refused. A slow-reading client is
// cancelled after --client_write_timeout while other streams finish.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pkv/v1/generation.pb.h"
#include "tests/harness/cluster.h"
#include "tests/harness/loopback.h"
#include "tests/integration/raw_call.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kMaxRequestBytes = 64 << 10;
constexpr int kMaxPromptTokens = 256;
constexpr int kMaxStopStrings = 4;
constexpr int kWriteTimeoutMs = 3000;
constexpr int kMaxStreamsPerConnection = 2;
constexpr int kHandshakeTimeoutMs = 1000;
constexpr absl::Duration kCallDeadline = absl::Seconds(30);
constexpr char kGenerate[] = "/pkv.v1.Generation/Generate";
// The router parses requests itself (router/generation_service.h), so unparsable bytes get a clear
// INVALID_ARGUMENT rather than gRPC 1.51's UNIMPLEMENTED with no message.
constexpr char kNotAGenerateRequest[] =
    "the request is not a valid pkv.v1.GenerateRequest (malformed protobuf, or a string field "
    "that is not UTF-8)";

struct Case {
  std::string name;
  std::string request;  // serialized bytes
  grpc::StatusCode code;
  std::string message;  // expected substring of the status message
  std::string method = kGenerate;
  Metadata metadata;
  // The server answers while the client is still sending (oversized headers): the client may see
  // the connection close (UNAVAILABLE) instead of the status. Retried until the status shows.
  bool send_race = false;
  bool gzip = false;  // sent compressed
};

pkv::v1::GenerateRequest Valid() {
  pkv::v1::GenerateRequest r;
  r.mutable_token_ids()->add_ids(5);
  r.mutable_token_ids()->add_ids(17);
  r.mutable_sampling()->set_max_tokens(4);
  r.mutable_sampling()->set_temperature(0);
  return r;
}

// A valid request changed by `edit`, serialized.
std::string With(const std::function<void(pkv::v1::GenerateRequest&)>& edit) {
  pkv::v1::GenerateRequest r = Valid();
  edit(r);
  return r.SerializeAsString();
}

Case Invalid(std::string name, const std::function<void(pkv::v1::GenerateRequest&)>& edit,
             std::string message) {
  return Case{std::move(name), With(edit), grpc::StatusCode::INVALID_ARGUMENT, std::move(message)};
}

// Sampling-parameter and prompt cases the router's validation must refuse (RELIABILITY V1, V2).
std::vector<Case> ValidationCases() {
  using R = pkv::v1::GenerateRequest;
  auto s = [](R& r) { return r.mutable_sampling(); };
  return {
      Invalid(
          "temperature -1", [&](R& r) { s(r)->set_temperature(-1); },
          "sampling.temperature must be a finite number in [0, 2], got -1"),
      Invalid(
          "temperature NaN", [&](R& r) { s(r)->set_temperature(std::nanf("")); },
          "sampling.temperature must be a finite number in [0, 2], got nan"),
      Invalid(
          "temperature 3", [&](R& r) { s(r)->set_temperature(3); },
          "sampling.temperature must be a finite number in [0, 2], got 3"),
      Invalid(
          "top_p 0", [&](R& r) { s(r)->set_top_p(0); }, "sampling.top_p must be in (0, 1], got 0"),
      Invalid(
          "top_p 1.5", [&](R& r) { s(r)->set_top_p(1.5); },
          "sampling.top_p must be in (0, 1], got 1.5"),
      Invalid(
          "top_k above vocab", [&](R& r) { s(r)->set_top_k(513); },
          "sampling.top_k must be in [0, vocab_size 512], got 513"),
      Invalid(
          "min_p 1.5", [&](R& r) { s(r)->set_min_p(1.5); },
          "sampling.min_p must be in [0, 1], got 1.5"),
      Invalid(
          "token id == vocab", [&](R& r) { r.mutable_token_ids()->add_ids(512); },
          "token_ids[2] must be < vocab_size 512, got 512"),
      Invalid(
          "token id 2^31-1", [&](R& r) { r.mutable_token_ids()->set_ids(0, 2147483647u); },
          "token_ids[0] must be < vocab_size 512, got 2147483647"),
      Invalid(
          "empty token_ids", [&](R& r) { r.mutable_token_ids()->clear_ids(); },
          "token_ids must not be empty"),
      Invalid(
          "empty text", [&](R& r) { r.set_text(""); }, "text must not be empty"),
      Invalid(
          "no prompt", [&](R& r) { r.clear_prompt(); }, "prompt must be set"),
      Invalid(
          "max_tokens 0", [&](R& r) { s(r)->set_max_tokens(0); },
          "sampling.max_tokens must be >= 1, got 0"),
      Invalid(
          "huge max_tokens", [&](R& r) { s(r)->set_max_tokens(4000000000u); },
          "sampling.max_tokens 4000000000 plus 2 prompt tokens must be <= max_context 1024"),
      Invalid(
          "prompt over --max_prompt_tokens",
          [&](R& r) {
            for (int i = 2; i <= kMaxPromptTokens; ++i) r.mutable_token_ids()->add_ids(7);
          },
          "token_ids has 257 tokens, more than the limit of 256 prompt tokens"),
      Invalid(
          "too many stop strings",
          [&](R& r) {
            for (int i = 0; i <= kMaxStopStrings; ++i) s(r)->add_stop(absl::StrCat("s", i));
          },
          "sampling.stop has 5 strings, more than the limit of 4"),
      Invalid(
          "empty stop string", [&](R& r) { s(r)->add_stop(""); },
          "sampling.stop[0] must not be empty"),
      Invalid(
          "stop string too long", [&](R& r) { s(r)->add_stop(std::string(300, 'x')); },
          "sampling.stop[0] has 300 bytes, more than the limit of 256"),
      Invalid(
          "stop token id out of vocab", [&](R& r) { s(r)->add_stop_token_ids(600); },
          "sampling.stop_token_ids[0] must be < vocab_size 512, got 600"),
      Invalid(
          "top_logprobs 21",
          [&](R& r) {
            s(r)->set_logprobs(true);
            s(r)->set_top_logprobs(21);
          },
          "sampling.top_logprobs must be in [0, 20], got 21"),
      Invalid(
          "top_logprobs without logprobs", [&](R& r) { s(r)->set_top_logprobs(3); },
          "requires sampling.logprobs = true"),
      Invalid(
          "request_id with a space", [&](R& r) { r.set_request_id("a b"); },
          "request_id may only contain [A-Za-z0-9_.:-], got byte 0x20 at offset 1"),
      Invalid(
          "session_id too long", [&](R& r) { r.set_session_id(std::string(300, 's')); },
          "session_id must be at most 256 bytes, got 300"),
  };
}

// Bytes no generated client would send, sizes and methods (RELIABILITY P1, P3, P5).
std::vector<Case> ProtocolCases() {
  std::vector<Case> cases;
  // Field 2 (token_ids) with a length prefix running past the end: unparsable.
  cases.push_back({"truncated length-delimited field", std::string("\x12\x7f\x08", 3),
                   grpc::StatusCode::INVALID_ARGUMENT, kNotAGenerateRequest});
  cases.push_back({"truncated varint", std::string("\x08\xff\xff\xff", 4),
                   grpc::StatusCode::INVALID_ARGUMENT, kNotAGenerateRequest});
  // Field 3 (text, a proto3 string) holding bytes that are not UTF-8.
  cases.push_back({"invalid UTF-8 in text", std::string("\x1a\x02\xc3\x28", 4),
                   grpc::StatusCode::INVALID_ARGUMENT, kNotAGenerateRequest});
  // Field 1 (request_id, a string) sent as a varint: parsed as an unknown field, so the request
  // has no prompt.
  cases.push_back({"wrong wire type", std::string("\x08\x01", 2),
                   grpc::StatusCode::INVALID_ARGUMENT, "prompt must be set"});
  cases.push_back({"message over --max_request_bytes", With([](pkv::v1::GenerateRequest& r) {
                     r.set_text(std::string(kMaxRequestBytes + 10, 'a'));
                   }),
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "larger than max"});
  // RELIABILITY P2: 2 MiB of text compresses to a few KiB; the limit applies to the inflated size.
  Case bomb{"gzip inflating past --max_request_bytes",
            With([](pkv::v1::GenerateRequest& r) { r.set_text(std::string(2 << 20, 'a')); }),
            grpc::StatusCode::RESOURCE_EXHAUSTED, "larger than max"};
  bomb.gzip = true;
  cases.push_back(std::move(bomb));
  // A text prompt is tokenized by the worker, which applies the router's cap (no pages, no tokens).
  std::string long_text;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&long_text, "word", i, " and more ");
  cases.push_back({"text prompt over --max_prompt_tokens",
                   With([&](pkv::v1::GenerateRequest& r) { r.set_text(long_text); }),
                   grpc::StatusCode::INVALID_ARGUMENT, "more than the limit of 256 prompt tokens"});
  cases.push_back({"unknown method", Valid().SerializeAsString(), grpc::StatusCode::UNIMPLEMENTED,
                   "", "/pkv.v1.Generation/Nope"});
  cases.push_back({"unknown service", Valid().SerializeAsString(), grpc::StatusCode::UNIMPLEMENTED,
                   "", "/pkv.v1.Nothing/Generate"});
  // Field 1 announces 5 bytes and 2 follow.
  cases.push_back({"malformed Abort",
                   std::string("\x0a\x05"
                               "ab",
                               4),
                   grpc::StatusCode::INVALID_ARGUMENT,
                   "the request is not a valid pkv.v1.AbortRequest", "/pkv.v1.Generation/Abort"});
  cases.push_back({"Abort without request_id", "", grpc::StatusCode::INVALID_ARGUMENT,
                   "request_id must be set", "/pkv.v1.Generation/Abort"});
  // --max_metadata_bytes=8192 (RELIABILITY P4): 4 KiB passes (the canary below), 16 KiB, 64 KiB
  // and 1000 headers do not.
  for (const int kib : {16, 64}) {
    cases.push_back({absl::StrCat(kib, " KiB of metadata"), Valid().SerializeAsString(),
                     grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "received initial metadata size exceeds limit", kGenerate,
                     Metadata{{"x-big", std::string(kib << 10, 'm')}}, true});
  }
  Metadata many;
  for (int i = 0; i < 1000; ++i) many.emplace_back(absl::StrCat("x-h", i), "v");
  cases.push_back({"1000 headers", Valid().SerializeAsString(),
                   grpc::StatusCode::RESOURCE_EXHAUSTED,
                   "received initial metadata size exceeds limit", kGenerate, many, true});
  return cases;
}

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.num_workers = 2;
    options.router_args = {absl::StrCat("--max_request_bytes=", kMaxRequestBytes),
                           absl::StrCat("--max_prompt_tokens=", kMaxPromptTokens),
                           absl::StrCat("--max_stop_strings=", kMaxStopStrings),
                           "--max_metadata_bytes=8192",
                           absl::StrCat("--max_concurrent_streams=", kMaxStreamsPerConnection),
                           absl::StrCat("--client_write_timeout=", kWriteTimeoutMs, "ms"),
                           absl::StrCat("--handshake_timeout=", kHandshakeTimeoutMs, "ms")};
    auto c = Cluster::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  std::shared_ptr<grpc::Channel> RouterChannel() const {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(cluster_->router_address(), grpc::InsecureChannelCredentials(),
                                     args);
  }
  double WorkerSum(const std::string& sample) { return SumOverWorkers(*cluster_, {0, 1}, sample); }
  void ExpectAllServingAndQuiescent() {
    EXPECT_TRUE(WaitServing(cluster_->router_address(), absl::Seconds(5)).ok()) << cluster_->Logs();
    for (int w = 0; w < cluster_->num_workers(); ++w) {
      EXPECT_TRUE(WaitServing(cluster_->worker(w).address(), absl::Seconds(5)).ok());
      absl::Status quiet = WaitWorkerQuiescent(cluster_->worker(w), absl::Seconds(10));
      EXPECT_TRUE(quiet.ok()) << quiet;
    }
  }

  static Cluster* cluster_;
};

Cluster* BadInputTest::cluster_ = nullptr;

TEST_F(BadInputTest, EveryCaseGetsItsStatusAndMessageAndServersStayUp) {
  std::vector<Case> cases = ValidationCases();
  for (Case& c : ProtocolCases()) cases.push_back(std::move(c));
  ASSERT_GE(cases.size(), 20u);
  const double generated = WorkerSum("pkv_generated_tokens_total");
  const double prompt = WorkerSum("pkv_prompt_tokens_total");
  const double allocs = WorkerSum("pkv_kv_page_allocs");
  const double invalid =
      RouterSample(*cluster_, "pkv_router_requests_total{code=\"INVALID_ARGUMENT\"}");
  int invalid_generate = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawResult r = RawCall(RouterChannel(), c.method, c.request, c.metadata, kCallDeadline, c.gzip);
    for (int retry = 0; c.send_race && retry < 10 && r.status.error_code() != c.code; ++retry) {
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
      r = RawCall(RouterChannel(), c.method, c.request, c.metadata, kCallDeadline, c.gzip);
    }
    EXPECT_EQ(r.status.error_code(), c.code) << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr(c.message));
    EXPECT_TRUE(r.responses.empty());
    invalid_generate += c.method == kGenerate && c.code == grpc::StatusCode::INVALID_ARGUMENT;
  }
  ExpectAllServingAndQuiescent();
  // Workers saw nothing: no prompt admitted, no token generated, no page allocated.
  EXPECT_EQ(WorkerSum("pkv_generated_tokens_total"), generated);
  EXPECT_EQ(WorkerSum("pkv_prompt_tokens_total"), prompt);
  EXPECT_EQ(WorkerSum("pkv_kv_page_allocs"), allocs);
  // The router counted each refused stream once, under its code.
  EXPECT_EQ(RouterSample(*cluster_, "pkv_router_requests_total{code=\"INVALID_ARGUMENT\"}"),
            invalid + invalid_generate);
  // Canary: a valid request still works, with a 4 KiB header (under the 8 KiB limit).
  const RawResult ok = RawCall(RouterChannel(), kGenerate, Valid().SerializeAsString(),
                               {{"x-fill", std::string(4 << 10, 'f')}});
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_FALSE(ok.responses.empty());
}

// A stream whose client never reads: a generation with big messages (20 logprob alternatives per
// token) on a connection whose stream window is small and never grows.
struct HeldStream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<pkv::v1::GenerateResponse>> reader;

  HeldStream(pkv::v1::Generation::Stub* stub, int key) {
    pkv::v1::GenerateRequest request = GreedyRequest(key, 4, 1000);
    request.mutable_sampling()->set_logprobs(true);
    request.mutable_sampling()->set_top_logprobs(20);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    ctx.set_wait_for_ready(true);
    reader = stub->Generate(&ctx, request);
  }
  // Reads what arrived before the router cancelled the stream; the final status and token count.
  std::pair<grpc::Status, int> Drain() {
    pkv::v1::GenerateResponse response;
    int tokens = 0;
    while (reader->Read(&response)) tokens += response.chunk().token_ids_size();
    return {reader->Finish(), tokens};
  }
};

std::unique_ptr<pkv::v1::Generation::Stub> SmallWindowStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  return pkv::v1::Generation::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// RELIABILITY S3: a client that never reads is cancelled after the write timeout; streams of
// other clients run to completion meanwhile; the worker frees the slow stream's pages.
TEST_F(BadInputTest, SlowReaderIsCancelledWhileOthersFinish) {
  const double cancels_before = RouterSample(*cluster_, "pkv_router_slow_client_cancels_total");
  auto slow_stub = SmallWindowStub(cluster_->router_address());
  HeldStream slow(slow_stub.get(), 1);  // never read until the end

  std::vector<pkv::v1::GenerateRequest> others;
  for (int i = 0; i < 3; ++i) others.push_back(GreedyRequest(10 + i, 8, 64));
  const std::vector<Outcome> outcomes = RunConcurrently(*cluster_, others, absl::Seconds(60));
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_TRUE(outcomes[i].status.ok()) << outcomes[i].status.error_message();
    EXPECT_EQ(outcomes[i].tokens.size(), 64u);
  }
  const bool cancelled = WaitFor(
      [&] {
        return RouterSample(*cluster_, "pkv_router_slow_client_cancels_total") ==
               cancels_before + 1;
      },
      absl::Milliseconds(kWriteTimeoutMs) + absl::Seconds(20));
  EXPECT_TRUE(cancelled) << cluster_->Logs();
  // The client now reads what reached it before the cancel, then the CANCELLED status.
  const auto [status, received] = slow.Drain();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  EXPECT_LT(received, 1000);
  // The admission slot is released when gRPC is done with the call (OnDone), which can come just
  // after the client has its status: wait for it (a leaked slot still fails).
  EXPECT_TRUE(WaitFor([&] { return RouterSample(*cluster_, "pkv_router_inflight") == 0; },
                      absl::Seconds(5)))
      << RouterSample(*cluster_, "pkv_router_inflight") << " streams still hold a slot";
  ExpectAllServingAndQuiescent();
}

// Issue 7 item 7 / RELIABILITY S5: one connection runs at most --max_concurrent_streams streams;
// the client holds a further one back (HTTP/2 SETTINGS), so it never reaches the router, while
// other connections are served. Once the held streams end, the connection serves again.
TEST_F(BadInputTest, StreamsBeyondThePerConnectionLimitWait) {
  const double cancels_before = RouterSample(*cluster_, "pkv_router_slow_client_cancels_total");
  const double requests_before =
      RouterSample(*cluster_, "pkv_router_request_duration_seconds_count");
  auto stub = SmallWindowStub(cluster_->router_address());
  std::vector<std::unique_ptr<HeldStream>> held;
  for (int i = 0; i < kMaxStreamsPerConnection; ++i) {
    held.push_back(std::make_unique<HeldStream>(stub.get(), 20 + i));
  }
  ASSERT_TRUE(WaitFor(
      [&] { return RouterSample(*cluster_, "pkv_router_inflight") == kMaxStreamsPerConnection; },
      absl::Seconds(10)));
  // Its deadline (0.5 s) passes long before the write timeout (3 s) frees a stream.
  const pkv::v1::GenerateRequest small = GreedyRequest(30, 4, 4);
  const Outcome waited = Stream(stub.get(), small, absl::Milliseconds(500));
  EXPECT_EQ(waited.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << waited.status.error_message();
  EXPECT_TRUE(waited.tokens.empty());
  auto other = NewRouterStub(*cluster_);
  const Outcome elsewhere = Stream(other.get(), small, absl::Seconds(30));
  EXPECT_TRUE(elsewhere.status.ok()) << elsewhere.status.error_message();

  ASSERT_TRUE(WaitFor(
      [&] {
        return RouterSample(*cluster_, "pkv_router_slow_client_cancels_total") ==
               cancels_before + kMaxStreamsPerConnection;
      },
      absl::Milliseconds(kWriteTimeoutMs) + absl::Seconds(20)));
  const Outcome after = Stream(stub.get(), small, absl::Seconds(30));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  for (auto& h : held) EXPECT_EQ(h->Drain().first.error_code(), grpc::StatusCode::CANCELLED);
  // The router saw the two held streams and the two served ones, never the one that waited. A
  // held stream the router cut loose is counted when its reactor finishes, which can come after
  // the client has seen CANCELLED (a loaded CI machine showed 3 of 4 at the first sample), so wait
  // for the count; the waited stream ended seconds ago, so a fifth would already be there.
  const double expected = requests_before + kMaxStreamsPerConnection + 2;
  WaitFor(
      [&] {
        return RouterSample(*cluster_, "pkv_router_request_duration_seconds_count") >= expected;
      },
      absl::Seconds(10));
  EXPECT_EQ(RouterSample(*cluster_, "pkv_router_request_duration_seconds_count"), expected);
  ExpectAllServingAndQuiescent();
}

// RELIABILITY S1: connections that never send the HTTP/2 preface are closed by the handshake
// timeout; a client on another connection is served meanwhile.
TEST_F(BadInputTest, IdleConnectionsAreClosedByTheHandshakeTimeout) {
  const int port =
      std::stoi(cluster_->router_address().substr(cluster_->router_address().rfind(':') + 1));
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    const int fd = ConnectLoopback(port);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  auto stub = NewRouterStub(*cluster_);
  const Outcome served = Stream(stub.get(), GreedyRequest(40, 4, 8), absl::Seconds(30));
  EXPECT_TRUE(served.status.ok()) << served.status.error_message();
  // Each idle connection gets the server's preface (SETTINGS), then EOF well within the bound.
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(kHandshakeTimeoutMs) + absl::Seconds(15);
  for (const int fd : fds) {
    bool closed = false;
    while (!closed && absl::Now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      const int wait_ms =
          static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now())));
      if (poll(&p, 1, wait_ms) != 1) break;
      char buf[4096];
      closed = recv(fd, buf, sizeof(buf), 0) <= 0;  // EOF or reset
    }
    EXPECT_TRUE(closed) << "an idle connection is still open";
    close(fd);
  }
  EXPECT_TRUE(WaitServing(cluster_->router_address(), absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace pkv::testing
