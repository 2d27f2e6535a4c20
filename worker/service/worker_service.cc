#include "worker/service/worker_service.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "common/deadline.h"
#include "common/grpc_status.h"
#include "worker/service/generate_stream.h"

namespace pkv {
namespace {

// A stream that ends at once with a status (bad input, not ready, draining, full). A full worker
// adds the retry hint, as the router does.
class RejectedStream : public grpc::ServerWriteReactor<pkv::v1::WorkerGenerateResponse> {
 public:
  explicit RejectedStream(grpc::Status status) { Finish(std::move(status)); }
  RejectedStream(grpc::CallbackServerContext* context, grpc::Status status) {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      context->AddTrailingMetadata("grpc-retry-pushback-ms", std::to_string(kRetryPushbackMs));
    }
    Finish(std::move(status));
  }
  void OnDone() override { delete this; }
};

grpc::Status NotReady() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker is loading its model; retry shortly");
}

}  // namespace

WorkerService::WorkerService(std::string worker_id,
                             std::function<void(double timeout_seconds)> on_drain)
    : worker_id_(std::move(worker_id)), on_drain_(std::move(on_drain)) {}

grpc::ServerWriteReactor<pkv::v1::WorkerGenerateResponse>* WorkerService::Generate(
    grpc::CallbackServerContext* context, const pkv::v1::WorkerGenerateRequest* request) {
  grpc::Status allowed = policy_.Authorize(*context, /*admin=*/false);
  if (!allowed.ok()) return new RejectedStream(std::move(allowed));
  Engine* engine = engine_.load();
  if (engine == nullptr) return new RejectedStream(context, NotReady());
  const absl::Time deadline = ServerCallDeadline(*context);
  auto progress = std::make_shared<StreamProgress>();
  auto outbox = std::make_shared<StreamOutbox>(worker_id_, deadline, progress);
  absl::StatusOr<uint64_t> id = Submit(*engine, *request, deadline, outbox, std::move(progress));
  if (!id.ok()) return new RejectedStream(context, ToGrpcStatus(id.status()));
  const uint64_t seq_id = *id;
  StreamOutbox* sink = outbox.get();  // the reactor owns a reference until OnDone
  return new GenerateStream(context, std::move(outbox), [engine, seq_id, sink] {
    engine->Cancel(seq_id, sink->BrokenReason());  // OnCancel broke the outbox first
  });
}

absl::StatusOr<uint64_t> WorkerService::Submit(Engine& engine,
                                               const pkv::v1::WorkerGenerateRequest& request,
                                               absl::Time deadline,
                                               std::shared_ptr<RequestSink> sink,
                                               std::shared_ptr<StreamProgress> progress) {
  absl::StatusOr<uint64_t> id = engine.Submit(request, deadline, std::move(sink));
  if (id.ok()) progress_.Add(request.request().request_id(), std::move(progress));
  return id;
}

absl::StatusOr<uint64_t> WorkerService::SubmitInProcess(
    const pkv::v1::WorkerGenerateRequest& request, absl::Time deadline,
    std::shared_ptr<RequestSink> sink, std::shared_ptr<StreamProgress> progress) {
  Engine* engine = engine_.load();
  if (engine == nullptr) return FromGrpcStatus(NotReady());
  return Submit(*engine, request, deadline, std::move(sink), std::move(progress));
}

void WorkerService::CancelInProcess(uint64_t id, AbortReason reason) {
  Engine* engine = engine_.load();
  if (engine != nullptr) engine->Cancel(id, reason);
}

grpc::ServerUnaryReactor* WorkerService::Answer(
    grpc::CallbackServerContext* context, bool admin,
    const std::function<grpc::Status(Engine* engine)>& answer) {
  auto* reactor = context->DefaultReactor();
  grpc::Status status = policy_.Authorize(*context, admin);
  if (status.ok()) status = answer(engine_.load());
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerService::Abort(grpc::CallbackServerContext* context,
                                               const pkv::v1::AbortRequest* request,
                                               pkv::v1::AbortResponse* response) {
  return Answer(context, /*admin=*/false, [&](Engine* engine) {
    if (engine == nullptr) return NotReady();
    response->set_found(engine->CancelByRequestId(request->request_id()));
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerService::GetLoad(grpc::CallbackServerContext* context,
                                                 const pkv::v1::GetLoadRequest* request,
                                                 pkv::v1::Load* response) {
  return Answer(context, /*admin=*/false, [&](Engine* engine) {
    if (engine == nullptr) return NotReady();
    const EngineLoad load = engine->GetLoad();
    response->set_running(static_cast<uint32_t>(load.running));
    response->set_waiting(static_cast<uint32_t>(load.waiting));
    response->set_queued_tokens(static_cast<uint64_t>(load.queued_tokens));
    response->set_kv_pages_used(static_cast<uint64_t>(load.pages_used));
    response->set_kv_pages_free(static_cast<uint64_t>(load.pages_free));
    response->set_kv_pages_total(static_cast<uint64_t>(load.pages_total));
    response->set_draining(load.draining);
    response->set_worker_id(worker_id_);
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerService::GetProgress(grpc::CallbackServerContext* context,
                                                     const pkv::v1::GetProgressRequest* request,
                                                     pkv::v1::Progress* response) {
  return Answer(context, /*admin=*/false, [&](Engine* engine) {
    if (engine == nullptr) return NotReady();
    const std::optional<StreamProgressTable::Answer> progress =
        progress_.Lookup(request->request_id());
    response->set_found(progress.has_value());
    if (progress.has_value()) {
      response->set_tokens_produced(progress->tokens_produced);
      response->set_finished(progress->finished);
    }
    response->set_engine_stalled_ms(
        static_cast<uint64_t>(absl::ToInt64Milliseconds(engine->StalledFor(absl::Now()))));
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerService::Drain(grpc::CallbackServerContext* context,
                                               const pkv::v1::DrainRequest* request,
                                               pkv::v1::DrainResponse* response) {
  return Answer(context, /*admin=*/true, [&](Engine* engine) {
    if (engine != nullptr) {  // a worker still loading may be drained too
      const EngineLoad load = engine->GetLoad();
      response->set_in_flight(static_cast<uint32_t>(load.running + load.waiting));
    }
    if (on_drain_) on_drain_(request->timeout_seconds());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerService::GetModelInfo(grpc::CallbackServerContext* context,
                                                      const pkv::v1::GetModelInfoRequest* request,
                                                      pkv::v1::ModelInfo* response) {
  return Answer(context, /*admin=*/false, [&](Engine* engine) {
    if (engine == nullptr) return NotReady();
    *response = engine->GetModelInfo();
    return grpc::Status::OK;
  });
}

}  // namespace pkv
