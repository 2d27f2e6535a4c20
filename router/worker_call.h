// One attempt of a Generate stream on one worker: the client side of pkv.v1.Worker/Generate as a
// gRPC callback reactor. It always keeps one read pending (the router never pushes back on a
// worker; slow clients are absorbed by coalescing in GenerateStream), hands each message to its
// observer, and reports the final status once.
//
// Lifetime: owned by the observer (GenerateStream keeps every attempt until it is destroyed), who
// must stay alive until OnWorkerDone. Cancel() is thread-safe and may be called at any time,
// also before Start() or after the call ended.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "pkv/v1/worker.grpc.pb.h"

namespace pkv::router {

class WorkerCall;

class WorkerCallObserver {
 public:
  virtual ~WorkerCallObserver() = default;
  // Each message in order, on a gRPC thread; no two at once for one call.
  virtual void OnWorkerMessage(WorkerCall* call, pkv::v1::WorkerGenerateResponse message) = 0;
  // Exactly once, last; the call must not be used by gRPC afterwards.
  virtual void OnWorkerDone(WorkerCall* call, const grpc::Status& status) = 0;
};

class WorkerCall final : public grpc::ClientReadReactor<pkv::v1::WorkerGenerateResponse> {
 public:
  // `deadline`: the client's deadline (time_point::max() = none), propagated as is. The call
  // keeps `stub` (and so the worker's channel) alive until it is destroyed.
  WorkerCall(WorkerCallObserver* observer, int worker, std::shared_ptr<pkv::v1::Worker::Stub> stub,
             pkv::v1::WorkerGenerateRequest request,
             std::chrono::system_clock::time_point deadline);

  // Starts the RPC. Call once, without holding locks the observer's callbacks take.
  void Start();
  void Cancel() { ctx_.TryCancel(); }

  int worker() const { return worker_; }
  // True once any message arrived (the worker accepted the request).
  bool got_message() const { return got_message_.load(); }
  // The router gave up on a silent worker; the CANCELLED that follows means "worker lost".
  // `proven`: the worker's own answer showed the fault (a wedged engine, output that never
  // comes), so it is ejected at once; else (no answer) the registry verifies first.
  void MarkStalled(bool proven) {
    stall_proven_.store(proven);
    stalled_.store(true);
  }
  bool stalled() const { return stalled_.load(); }
  bool stall_proven() const { return stall_proven_.load(); }
  // The worker's stub, for the stall check's GetProgress.
  const std::shared_ptr<pkv::v1::Worker::Stub>& stub() const { return stub_; }
  // The router itself cancelled (client gone, stream finished); the CANCELLED is expected.
  void MarkAbandoned() { abandoned_.store(true); }
  bool abandoned() const { return abandoned_.load(); }

 private:
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  WorkerCallObserver* const observer_;
  const int worker_;
  const std::shared_ptr<pkv::v1::Worker::Stub> stub_;
  grpc::ClientContext ctx_;
  pkv::v1::WorkerGenerateRequest request_;
  pkv::v1::WorkerGenerateResponse response_;
  std::atomic<bool> got_message_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<bool> stall_proven_{false};
  std::atomic<bool> abandoned_{false};
};

}  // namespace pkv::router
