#include "router/direct_worker_call.h"

#include <optional>
#include <utility>

#include "common/grpc_status.h"

namespace pkv::router {

// Shared with the worker, which may call it after the call ended (a late message, the end of a
// request the router cancelled): it then does nothing. Holds the call's end while a message is
// being delivered (see the header).
class DirectWorkerCall::Receiver final : public DirectStreamSink {
 public:
  explicit Receiver(DirectWorkerCall* call) : call_(call) {}

  void OnMessage(pkv::v1::WorkerGenerateResponse message) override {
    DirectWorkerCall* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (call_ == nullptr || ended_) return;  // the router stopped listening
      call = call_;
      delivering_ = true;
    }
    call->Deliver(std::move(message));
    std::optional<grpc::Status> end;
    {
      absl::MutexLock lock(&mu_);
      delivering_ = false;
      if (held_end_.has_value()) {
        end = std::move(held_end_);
        call_ = nullptr;
      }
    }
    if (end.has_value()) call->Done(*end);  // last use: the observer may destroy the call
  }

  void OnEnd(const absl::Status& status) override { End(ToGrpcStatus(status)); }

  // The call's end, once: delivered now, or right after the message being delivered.
  void End(const grpc::Status& status) {
    DirectWorkerCall* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (call_ == nullptr || ended_) return;
      ended_ = true;
      if (delivering_) {
        held_end_ = status;
        return;
      }
      call = std::exchange(call_, nullptr);
    }
    call->Done(status);  // last use: the observer may destroy the call
  }

  // The call goes away (it always ended first; this only guards a call that never started).
  void Detach() {
    absl::MutexLock lock(&mu_);
    call_ = nullptr;
    ended_ = true;
  }

 private:
  absl::Mutex mu_;
  DirectWorkerCall* call_ ABSL_GUARDED_BY(mu_);  // null once the end was delivered
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> held_end_ ABSL_GUARDED_BY(mu_);
};

DirectWorkerCall::DirectWorkerCall(WorkerCallObserver* observer, int worker,
                                   std::shared_ptr<pkv::v1::Worker::Stub> stub,
                                   std::shared_ptr<DirectWorker> direct,
                                   pkv::v1::WorkerGenerateRequest request, absl::Time deadline)
    : WorkerCall(observer, worker, std::move(stub)),
      direct_(std::move(direct)),
      request_(std::move(request)),
      deadline_(deadline),
      receiver_(std::make_shared<Receiver>(this)) {}

DirectWorkerCall::~DirectWorkerCall() { receiver_->Detach(); }

void DirectWorkerCall::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) {
      receiver_->End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled before it started"));
      return;
    }
  }
  absl::StatusOr<std::unique_ptr<DirectGeneration>> generation =
      direct_->Generate(request_, deadline_, receiver_);
  if (!generation.ok()) {
    receiver_->End(ToGrpcStatus(generation.status()));  // nothing was queued
    return;
  }
  DirectGeneration* to_cancel = nullptr;
  {
    absl::MutexLock lock(&mu_);
    generation_ = *std::move(generation);
    if (cancelled_) to_cancel = generation_.get();  // Cancel came while Generate ran
  }
  if (to_cancel != nullptr) to_cancel->Cancel();
}

void DirectWorkerCall::Cancel() {
  DirectGeneration* to_cancel = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    to_cancel = generation_.get();  // null before Start queued it: Start cancels it then
  }
  if (to_cancel != nullptr) to_cancel->Cancel();  // the engine frees the pages within a step
  // As gRPC's TryCancel: the attempt ends now, whatever the engine does (a wedged one too).
  receiver_->End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the router"));
}

}  // namespace pkv::router
