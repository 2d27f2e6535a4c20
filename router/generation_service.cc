#include "router/generation_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "api/request_validation.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "router/generate_stream.h"

namespace pkv::router {
namespace {

// A Generate stream refused before it began (no valid API key, unparsable request).
class RefusedStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedStream(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// Parses a request the way gRPC's typed handlers would, but reports failure as INVALID_ARGUMENT.
template <typename Message>
grpc::Status Parse(const grpc::ByteBuffer& bytes, Message* message) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; deserializing consumes the buffer
  grpc::Status status = grpc::SerializationTraits<Message>::Deserialize(&copy, message);
  if (status.ok()) return status;
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrCat("the request is not a valid ", Message::descriptor()->full_name(),
                   " (malformed protobuf, or a string field that is not UTF-8)"));
}

template <typename Message>
void Serialize(const Message& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  (void)grpc::SerializationTraits<Message>::Serialize(message, out, &own_buffer);
}

}  // namespace

grpc::Status GenerationService::Admit(const grpc::CallbackServerContext& ctx) const {
  if (rc_.connections != nullptr && !rc_.connections->AdmitStream(ctx.peer())) {
    rc_.metrics->RecordRejection(RouterMetrics::Rejection::kConnectionLimit);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "this connection opens or resets streams faster than the router allows; "
                        "it is being closed (reconnect, and pace requests)");
  }
  if (rc_.auth == nullptr) return grpc::Status::OK;
  grpc::Status status = rc_.auth->Authenticate(ctx);
  if (!status.ok()) rc_.metrics->RecordAuthFailure();
  return status;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes) {
  grpc::Status auth = Admit(*ctx);
  if (!auth.ok()) {
    rc_.metrics->RecordRequest(static_cast<absl::StatusCode>(auth.error_code()), 0.0);
    return new RefusedStream(std::move(auth));
  }
  pkv::v1::GenerateRequest request;
  grpc::Status parsed = Parse(*bytes, &request);
  if (!parsed.ok()) {
    rc_.metrics->RecordRequest(absl::StatusCode::kInvalidArgument, 0.0);
    return new RefusedStream(std::move(parsed));
  }
  auto* stream = new GenerateStream(rc_, ctx, request);
  stream->Start();
  return stream;
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* ctx,
                                                   const grpc::ByteBuffer* bytes,
                                                   grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  pkv::v1::AbortRequest request;
  pkv::v1::AbortResponse response;
  grpc::Status status = Admit(*ctx);
  if (status.ok()) status = Parse(*bytes, &request);
  if (status.ok()) status = Abort(request, &response);
  if (status.ok()) Serialize(response, raw_response);
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::Status GenerationService::Abort(const pkv::v1::AbortRequest& request,
                                      pkv::v1::AbortResponse* response) {
  api::RequestLimits limits = rc_.options->limits;
  limits.require_request_id = true;
  absl::Status valid = api::ValidateRequestId(request.request_id(), limits);
  if (!valid.ok()) return ToGrpcStatus(valid);
  // The router ends the stream itself (CANCELLED to its client) and cancels the worker call,
  // which frees the request's pages at the worker within a step. The worker's own Abort RPC is
  // not used: the CANCELLED it ends the stream with would look like a failure of the worker.
  response->set_found(rc_.requests->Abort(request.request_id()));
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* ctx,
                                                          const grpc::ByteBuffer* bytes,
                                                          grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  pkv::v1::GetModelInfoRequest request;
  pkv::v1::ModelInfo response;
  grpc::Status status = Admit(*ctx);
  if (status.ok()) status = Parse(*bytes, &request);
  if (status.ok()) status = GetModelInfo(&response);
  if (status.ok()) Serialize(response, raw_response);
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::Status GenerationService::GetModelInfo(pkv::v1::ModelInfo* response) {
  std::optional<pkv::v1::ModelInfo> model = rc_.registry->AnyModelInfo();
  if (!model.has_value()) {
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("no healthy worker (0 of ", rc_.registry->size(),
                     " are healthy), so no model info; check the workers with `pkv health`"));
  }
  *response = std::move(*model);
  response->set_kv_pages_total(0);  // per worker; meaningless at the router (common.proto)
  return grpc::Status::OK;
}

}  // namespace pkv::router
