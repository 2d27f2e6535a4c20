#include "router/worker_call.h"

#include <utility>

namespace pkv::router {

WorkerCall::WorkerCall(WorkerCallObserver* observer, int worker,
                       std::shared_ptr<pkv::v1::Worker::Stub> stub,
                       pkv::v1::WorkerGenerateRequest request,
                       std::chrono::system_clock::time_point deadline)
    : observer_(observer), worker_(worker), stub_(std::move(stub)), request_(std::move(request)) {
  // time_point::max() maps to "no deadline"; otherwise the worker sees the client's remaining
  // time (C++ gRPC does not propagate deadlines by itself, RELIABILITY.md anchor 3).
  ctx_.set_deadline(deadline);
}

void WorkerCall::Start() {
  stub_->async()->Generate(&ctx_, &request_, this);
  StartRead(&response_);
  StartCall();
}

void WorkerCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows with the status
  got_message_.store(true);
  pkv::v1::WorkerGenerateResponse message = std::move(response_);
  response_.Clear();
  observer_->OnWorkerMessage(this, std::move(message));
  StartRead(&response_);
}

void WorkerCall::OnDone(const grpc::Status& status) {
  // Last statement: the observer may destroy this object.
  observer_->OnWorkerDone(this, status);
}

}  // namespace pkv::router
