// A WorkerCall into a worker in this process without gRPC (router/direct_worker.h): the request
// goes to the worker's engine as a C++ call, its messages come back by callback on the engine's
// thread and are relayed to the client from there (no transport, no serialization, no executor
// hand-off between the token and the client's write).
//
// Semantics match GrpcWorkerCall's: Cancel ends the attempt at once with CANCELLED (the engine
// drops the request within a step; a wedged engine cannot hold the stream), an engine error ends
// it with the engine's status, a refused Generate (draining, full, deadline passed) ends it with
// the refusal, so the stream re-places, migrates or fails exactly as for a remote worker.
//
// Threads: messages arrive on the engine's thread; Cancel may come from any thread, also from
// inside the observer's OnWorkerMessage (a write that failed inline). An end that arrives while a
// message is being delivered is held and delivered right after it, so OnWorkerDone is always last
// and never concurrent with a message of the same call.
#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/direct_worker.h"
#include "router/worker_call.h"

namespace pkv::router {

class DirectWorkerCall final : public WorkerCall {
 public:
  DirectWorkerCall(WorkerCallObserver* observer, int worker,
                   std::shared_ptr<pkv::v1::Worker::Stub> stub,
                   std::shared_ptr<DirectWorker> direct, pkv::v1::WorkerGenerateRequest request,
                   absl::Time deadline);
  ~DirectWorkerCall() override;

  void Start() override;
  void Cancel() override;

 private:
  class Receiver;  // the DirectStreamSink the worker holds; outlives this call if need be

  const std::shared_ptr<DirectWorker> direct_;
  const pkv::v1::WorkerGenerateRequest request_;
  const absl::Time deadline_;
  const std::shared_ptr<Receiver> receiver_;

  absl::Mutex mu_;
  std::unique_ptr<DirectGeneration> generation_ ABSL_GUARDED_BY(mu_);  // once queued
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pkv::router
