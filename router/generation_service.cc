#include "router/generation_service.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "api/request_validation.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "router/generate_stream.h"

namespace pkv::router {
namespace {

// Abort is a control message: answer within a second even when the worker is stuck.
constexpr absl::Duration kAbortTimeout = absl::Seconds(1);

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
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("the request is not a valid ", Message::descriptor()->full_name(),
                                   " (malformed protobuf, or a string field that is not UTF-8)"));
}

template <typename Message>
void Serialize(const Message& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  (void)grpc::SerializationTraits<Message>::Serialize(message, out, &own_buffer);
}

}  // namespace

grpc::Status GenerationService::Authenticate(const grpc::CallbackServerContext& ctx) const {
  if (rc_.auth == nullptr) return grpc::Status::OK;
  grpc::Status status = rc_.auth->Authenticate(ctx);
  if (!status.ok()) rc_.metrics->RecordAuthFailure();
  return status;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes) {
  grpc::Status auth = Authenticate(*ctx);
  if (!auth.ok()) {
    rc_.metrics->RecordRequest(absl::StatusCode::kUnauthenticated, 0.0);
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
  grpc::Status status = Authenticate(*ctx);
  if (status.ok()) status = Parse(*bytes, &request);
  if (!status.ok()) {
    reactor->Finish(std::move(status));
    return reactor;
  }
  Abort(ctx, request,
        [reactor, raw_response](grpc::Status status, const pkv::v1::AbortResponse& response) {
          if (status.ok()) Serialize(response, raw_response);
          reactor->Finish(std::move(status));
        });
  return reactor;
}

void GenerationService::Abort(
    grpc::CallbackServerContext* ctx, const pkv::v1::AbortRequest& request,
    std::function<void(grpc::Status, const pkv::v1::AbortResponse&)> done) {
  api::RequestLimits limits = rc_.options->limits;
  limits.require_request_id = true;
  absl::Status valid = api::ValidateRequestId(request.request_id(), limits);
  if (!valid.ok()) {
    done(ToGrpcStatus(valid), pkv::v1::AbortResponse());
    return;
  }
  const std::optional<int> worker = rc_.requests->WorkerOf(request.request_id());
  // A worker removed from DNS and retired since has no stub: the request cannot be there.
  std::shared_ptr<pkv::v1::Worker::Stub> stub;
  if (worker.has_value()) stub = rc_.registry->stub(*worker);
  if (stub == nullptr) {
    pkv::v1::AbortResponse not_found;
    not_found.set_found(false);
    done(grpc::Status::OK, not_found);
    return;
  }
  struct Forward {
    grpc::ClientContext ctx;
    pkv::v1::AbortRequest request;
    pkv::v1::AbortResponse response;
  };
  auto* forward = new Forward;
  forward->request = request;
  forward->ctx.set_deadline(
      std::min(ctx->deadline(), absl::ToChronoTime(absl::Now() + kAbortTimeout)));
  stub->async()->Abort(&forward->ctx, &forward->request, &forward->response,
                       [forward, done = std::move(done), stub](grpc::Status status) {
                         done(status, forward->response);
                         delete forward;
                       });
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* ctx,
                                                          const grpc::ByteBuffer* bytes,
                                                          grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  pkv::v1::GetModelInfoRequest request;
  pkv::v1::ModelInfo response;
  grpc::Status status = Authenticate(*ctx);
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
