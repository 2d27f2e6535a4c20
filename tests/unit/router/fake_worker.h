// An in-process stand-in for pkv-worker, serving pkv.v1.Worker and grpc.health.v1 on a loopback
// port, so the router's unit tests can script worker behaviour (refuse, stream, fail mid-stream,
// hang) and observe what reached the worker (requests, deadlines, cancellations, aborts).
// Test-only; a mock by design (the real worker is covered by the integration tests).
// Thread-safe: gRPC's callback server runs the unary handlers; each Generate call runs its script
// on a thread of its own (blocking writes over a reactor); the test thread reads observations.
// The callback API, not the synchronous server: gRPC 1.51's synchronous server could trip its own
// completion-queue refcount assertion ("prior > 0") shutting down while its pollers were in Next.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/server.h"
#include "grpcpp/support/channel_arguments.h"
#include "pkv/v1/worker.grpc.pb.h"

namespace pkv::router::testing {

constexpr uint32_t kFakeVocab = 512;
constexpr uint32_t kFakeMaxContext = 512;

// What one Generate call does.
struct FakeScript {
  grpc::Status refuse = grpc::Status::OK;  // non-OK: fail with it before Accepted
  int chunks = 4;                          // chunks after Accepted
  int tokens_per_chunk = 1;
  absl::Duration chunk_interval = absl::ZeroDuration();
  // kFail: the worker crashes after its chunks: the stream fails with `fail` and its health
  // checks fail for `down_for` (a restart), so the router's verification ejects it.
  // kHang: the worker stops sending yet claims, when asked (GetProgress), to have produced more
  // tokens than it sent: output that never comes.
  enum class End { kComplete, kFail, kHang } end = End::kComplete;
  grpc::Status fail = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker lost");
  absl::Duration down_for = absl::Milliseconds(500);
};

class FakeWorker {
 public:
  explicit FakeWorker(std::string worker_id);
  ~FakeWorker();

  // Binds 127.0.0.1:0 and serves; SERVING for "" and "pkv.v1.Worker".
  void Start();
  void Stop();
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // A channel to this fake over gRPC's in-process transport (a router's in-process worker).
  // REQUIRES: started.
  std::shared_ptr<grpc::Channel> InProcessChannel() {
    return server_->InProcessChannel(grpc::ChannelArguments());
  }
  const std::string& worker_id() const { return worker_id_; }

  // Script by call index (0-based, per fake). Default: FakeScript{}.
  void SetScript(std::function<FakeScript(int call_index)> script);
  void SetRunning(uint32_t running) { running_.store(running); }
  void SetServing(bool serving);

  // Observations.
  int generate_calls() const { return calls_.load(); }
  int cancelled_calls() const { return cancelled_.load(); }
  // Waits (bounded) until `n` calls saw their cancellation.
  bool WaitForCancelled(int n, absl::Duration timeout) const;
  std::vector<pkv::v1::WorkerGenerateRequest> requests() const;
  std::vector<std::chrono::system_clock::time_point> deadlines() const;
  // Token ids streamed by call `i`, in order.
  std::vector<uint32_t> sent_tokens(int i) const;
  std::vector<std::string> aborted_ids() const;
  int progress_checks() const { return progress_checks_.load(); }

 private:
  class Service;
  class Health;
  class GenerateCall;
  struct Progress {
    uint64_t tokens_produced = 0;
    bool finished = false;
  };
  // Runs one call's script; `call` writes (blocking until gRPC is done with each message).
  grpc::Status Generate(GenerateCall* call, const pkv::v1::WorkerGenerateRequest& request);

  const std::string worker_id_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Health> health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<uint32_t> running_{0};
  std::atomic<int> calls_{0};
  std::atomic<int> cancelled_{0};
  std::atomic<int> progress_checks_{0};
  std::atomic<bool> serving_{true};

  mutable absl::Mutex mu_;
  std::function<FakeScript(int)> script_ ABSL_GUARDED_BY(mu_);
  std::vector<pkv::v1::WorkerGenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::chrono::system_clock::time_point> deadlines_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<uint32_t>> sent_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> aborted_ ABSL_GUARDED_BY(mu_);
  absl::Time down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, Progress> progress_ ABSL_GUARDED_BY(mu_);  // by request id

  friend class Service;
  friend class GenerateCall;
};

}  // namespace pkv::router::testing
