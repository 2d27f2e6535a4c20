// pkv.v1.Generation served by the router (callback API): Generate streams are GenerateStream
// reactors; Abort ends the live stream with that request id (CANCELLED) and cancels its worker
// call; GetModelInfo answers from the registry's cache of a healthy worker's ModelInfo
// (UNAVAILABLE when none is healthy). Every
// method first checks the API key when keys are configured (grpc.health.v1 is not this service and
// stays open).
//
// The methods are registered raw (request and response as grpc::ByteBuffer) and parse requests
// themselves: an unparsable message (malformed protobuf, a string field that is not UTF-8) gets
// INVALID_ARGUMENT naming the message type, where gRPC 1.51's typed callback handlers answer
// UNIMPLEMENTED with an empty message. The wire format is unchanged for clients.
// Thread-safe; holds only the shared RouterContext.
#pragma once

#include "grpcpp/support/byte_buffer.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "router/router_context.h"

namespace pkv::router {

using RawGenerationService = pkv::v1::Generation::WithRawCallbackMethod_Generate<
    pkv::v1::Generation::WithRawCallbackMethod_Abort<
        pkv::v1::Generation::WithRawCallbackMethod_GetModelInfo<pkv::v1::Generation::Service>>>;

class GenerationService final : public RawGenerationService {
 public:
  explicit GenerationService(const RouterContext& rc) : rc_(rc) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

 private:
  // Every method starts here: OK, RESOURCE_EXHAUSTED for a connection over its stream limits
  // (router/connection_guard.h), or UNAUTHENTICATED (router/api_key_auth.h) to finish with.
  grpc::Status Admit(const grpc::CallbackServerContext& ctx) const;
  // The typed bodies.
  grpc::Status Abort(const pkv::v1::AbortRequest& request, pkv::v1::AbortResponse* response);
  grpc::Status GetModelInfo(pkv::v1::ModelInfo* response);

  const RouterContext rc_;
};

}  // namespace pkv::router
