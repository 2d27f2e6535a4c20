#include "router/grpc_worker_call.h"

#include <utility>

namespace pkv::router {

GrpcWorkerCall::GrpcWorkerCall(WorkerCallObserver* observer, int worker,
                               std::shared_ptr<pkv::v1::Worker::Stub> stub,
                               pkv::v1::WorkerGenerateRequest request,
                               std::chrono::system_clock::time_point deadline)
    : WorkerCall(observer, worker, std::move(stub)), request_(std::move(request)) {
  // time_point::max() maps to "no deadline"; otherwise the worker sees the client's remaining
  // time.
  ctx_.set_deadline(deadline);
}

void GrpcWorkerCall::Start() {
  stub()->async()->Generate(&ctx_, &request_, this);
  StartRead(&response_);
  StartCall();
}

void GrpcWorkerCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows with the status
  pkv::v1::WorkerGenerateResponse message = std::move(response_);
  response_.Clear();
  Deliver(std::move(message));
  StartRead(&response_);
}

void GrpcWorkerCall::OnDone(const grpc::Status& status) {
  Done(status);  // last statement: the observer may destroy this object
}

}  // namespace pkv::router
