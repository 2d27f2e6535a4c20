#include "router/generation_service.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "api/request_validation.h"
#include "common/grpc_status.h"
#include "router/generate_stream.h"

namespace pkv::router {
namespace {

// Abort is a control message: answer within a second even when the worker is stuck.
constexpr absl::Duration kAbortTimeout = absl::Seconds(1);

// A Generate stream refused before it began (no valid API key): finishes at once.
class RefusedStream final : public grpc::ServerWriteReactor<pkv::v1::GenerateResponse> {
 public:
  explicit RefusedStream(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status GenerationService::Authenticate(const grpc::CallbackServerContext& ctx) const {
  if (rc_.auth == nullptr) return grpc::Status::OK;
  grpc::Status status = rc_.auth->Authenticate(ctx);
  if (!status.ok()) rc_.metrics->RecordAuthFailure();
  return status;
}

grpc::ServerWriteReactor<pkv::v1::GenerateResponse>* GenerationService::Generate(
    grpc::CallbackServerContext* ctx, const pkv::v1::GenerateRequest* request) {
  grpc::Status auth = Authenticate(*ctx);
  if (!auth.ok()) {
    rc_.metrics->RecordRequest(absl::StatusCode::kUnauthenticated, 0.0);
    return new RefusedStream(std::move(auth));
  }
  auto* stream = new GenerateStream(rc_, ctx, *request);
  stream->Start();
  return stream;
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* ctx,
                                                   const pkv::v1::AbortRequest* request,
                                                   pkv::v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  grpc::Status auth = Authenticate(*ctx);
  if (!auth.ok()) {
    reactor->Finish(std::move(auth));
    return reactor;
  }
  api::RequestLimits limits = rc_.options->limits;
  limits.require_request_id = true;
  absl::Status valid = api::ValidateRequestId(request->request_id(), limits);
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  const std::optional<int> worker = rc_.requests->WorkerOf(request->request_id());
  // A worker removed from DNS and retired since has no stub: the request cannot be there.
  std::shared_ptr<pkv::v1::Worker::Stub> stub;
  if (worker.has_value()) stub = rc_.registry->stub(*worker);
  if (stub == nullptr) {
    response->set_found(false);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  struct Forward {
    grpc::ClientContext ctx;
    pkv::v1::AbortRequest request;
    pkv::v1::AbortResponse response;
  };
  auto* forward = new Forward;
  forward->request = *request;
  forward->ctx.set_deadline(
      std::min(ctx->deadline(), absl::ToChronoTime(absl::Now() + kAbortTimeout)));
  stub->async()->Abort(&forward->ctx, &forward->request, &forward->response,
                       [forward, reactor, response, stub](grpc::Status status) {
                         if (status.ok()) *response = forward->response;
                         delete forward;
                         reactor->Finish(status);
                       });
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(
    grpc::CallbackServerContext* ctx, const pkv::v1::GetModelInfoRequest* /*request*/,
    pkv::v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  grpc::Status auth = Authenticate(*ctx);
  if (!auth.ok()) {
    reactor->Finish(std::move(auth));
    return reactor;
  }
  std::optional<pkv::v1::ModelInfo> model = rc_.registry->AnyModelInfo();
  if (!model.has_value()) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("no healthy worker (0 of ", rc_.registry->size(),
                     " are healthy), so no model info; check the workers with `pkv health`")));
    return reactor;
  }
  *response = std::move(*model);
  response->set_kv_pages_total(0);  // per worker; meaningless at the router (common.proto)
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace pkv::router
