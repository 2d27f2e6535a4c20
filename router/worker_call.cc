#include "router/worker_call.h"

#include <utility>

#include "common/deadline.h"
#include "router/direct_worker_call.h"
#include "router/grpc_worker_call.h"

namespace pkv::router {

std::unique_ptr<WorkerCall> MakeWorkerCall(WorkerCallObserver* observer, int worker,
                                           std::shared_ptr<pkv::v1::Worker::Stub> stub,
                                           std::shared_ptr<DirectWorker> direct,
                                           pkv::v1::WorkerGenerateRequest request,
                                           absl::Time deadline) {
  if (direct != nullptr) {
    return std::make_unique<DirectWorkerCall>(observer, worker, std::move(stub), std::move(direct),
                                              std::move(request), deadline);
  }
  return std::make_unique<GrpcWorkerCall>(observer, worker, std::move(stub), std::move(request),
                                          ToClientDeadline(deadline));
}

}  // namespace pkv::router
