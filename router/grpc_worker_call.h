// A WorkerCall over gRPC: the client side of pkv.v1.Worker/Generate as a callback reactor. It
// always keeps one read pending (the router never pushes back on a worker; slow clients are
// absorbed by coalescing in GenerateStream). Lifetime and threading: router/worker_call.h.
#pragma once

#include <chrono>
#include <memory>

#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "router/worker_call.h"

namespace pkv::router {

class GrpcWorkerCall final : public WorkerCall,
                             public grpc::ClientReadReactor<pkv::v1::WorkerGenerateResponse> {
 public:
  // `deadline`: time_point::max() = none.
  GrpcWorkerCall(WorkerCallObserver* observer, int worker,
                 std::shared_ptr<pkv::v1::Worker::Stub> stub,
                 pkv::v1::WorkerGenerateRequest request,
                 std::chrono::system_clock::time_point deadline);

  void Start() override;
  void Cancel() override { ctx_.TryCancel(); }

 private:
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  grpc::ClientContext ctx_;
  pkv::v1::WorkerGenerateRequest request_;
  pkv::v1::WorkerGenerateResponse response_;
};

}  // namespace pkv::router
