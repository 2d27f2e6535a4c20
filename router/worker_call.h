// One attempt of a Generate stream on one worker, whichever way the worker is reached: over gRPC
// (GrpcWorkerCall, router/grpc_worker_call.h: a remote worker, or an in-process one over its
// server's in-process channel) or by a direct call into a worker in this process
// (DirectWorkerCall, router/direct_worker_call.h). Both hand each message to the observer and
// report the final status once, with the same meanings, so GenerateStream's failover, migration,
// stall checks, cancel and deadlines do not care which one runs.
//
// Lifetime: owned by the observer (GenerateStream keeps every attempt until it is destroyed), who
// must stay alive until OnWorkerDone. Cancel() is thread-safe and may be called at any time, also
// before Start() or after the call ended.
#pragma once

#include <atomic>
#include <memory>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "router/direct_worker.h"

namespace pkv::router {

class WorkerCall;

class WorkerCallObserver {
 public:
  virtual ~WorkerCallObserver() = default;
  // Each message in order; no two at once for one call. On a gRPC thread, or for a direct call
  // on the worker engine's thread (so the relay writes to the client from the thread that
  // produced the token): must not block.
  virtual void OnWorkerMessage(WorkerCall* call, pkv::v1::WorkerGenerateResponse message) = 0;
  // Exactly once, last, never while an OnWorkerMessage of the same call runs; the call does not
  // touch the observer afterwards.
  virtual void OnWorkerDone(WorkerCall* call, const grpc::Status& status) = 0;
};

class WorkerCall {
 public:
  virtual ~WorkerCall() = default;
  WorkerCall(const WorkerCall&) = delete;
  WorkerCall& operator=(const WorkerCall&) = delete;

  // Starts the attempt. Call once, without holding locks the observer's callbacks take (the
  // observer may be called before Start returns).
  virtual void Start() = 0;
  // Ends the attempt at once: OnWorkerDone(CANCELLED) follows (unless it already ended) and the
  // worker drops the request.
  virtual void Cancel() = 0;

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
  // The worker's stub, for the stall check's GetProgress (a direct worker answers it over its
  // in-process channel).
  const std::shared_ptr<pkv::v1::Worker::Stub>& stub() const { return stub_; }
  // The router itself cancelled (client gone, stream finished); the CANCELLED is expected.
  void MarkAbandoned() { abandoned_.store(true); }
  bool abandoned() const { return abandoned_.load(); }

 protected:
  WorkerCall(WorkerCallObserver* observer, int worker, std::shared_ptr<pkv::v1::Worker::Stub> stub)
      : observer_(observer), worker_(worker), stub_(std::move(stub)) {}

  // For the implementations: deliver one message / the end (the observer may destroy this call
  // inside Done: it must be the caller's last use of it).
  void Deliver(pkv::v1::WorkerGenerateResponse message) {
    got_message_.store(true);
    observer_->OnWorkerMessage(this, std::move(message));
  }
  void Done(const grpc::Status& status) { observer_->OnWorkerDone(this, status); }

 private:
  WorkerCallObserver* const observer_;
  const int worker_;
  const std::shared_ptr<pkv::v1::Worker::Stub> stub_;
  std::atomic<bool> got_message_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<bool> stall_proven_{false};
  std::atomic<bool> abandoned_{false};
};

// The attempt for worker `worker`: a direct call when `direct` is set, else Worker.Generate over
// `stub`. `deadline`: the client's (InfiniteFuture: none), propagated as is (C++ gRPC does not
// propagate deadlines by itself, RELIABILITY.md anchor 3). The call keeps `stub` and `direct`
// alive until it is destroyed.
std::unique_ptr<WorkerCall> MakeWorkerCall(WorkerCallObserver* observer, int worker,
                                           std::shared_ptr<pkv::v1::Worker::Stub> stub,
                                           std::shared_ptr<DirectWorker> direct,
                                           pkv::v1::WorkerGenerateRequest request,
                                           absl::Time deadline);

}  // namespace pkv::router
