// pkv.v1.Generation served by the router (callback API): Generate streams are GenerateStream
// reactors; Abort is forwarded to the worker holding the request; GetModelInfo answers from the
// registry's cache of a healthy worker's ModelInfo (UNAVAILABLE when none is healthy). Every
// method first checks the API key when keys are configured (grpc.health.v1 is not this service and
// stays open).
// Thread-safe; holds only the shared RouterContext.
#pragma once

#include "pkv/v1/generation.grpc.pb.h"
#include "router/router_context.h"

namespace pkv::router {

class GenerationService final : public pkv::v1::Generation::CallbackService {
 public:
  explicit GenerationService(const RouterContext& rc) : rc_(rc) {}

  grpc::ServerWriteReactor<pkv::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx, const pkv::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* ctx,
                                  const pkv::v1::AbortRequest* request,
                                  pkv::v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const pkv::v1::GetModelInfoRequest* request,
                                         pkv::v1::ModelInfo* response) override;

 private:
  // Every method starts here: OK, or UNAUTHENTICATED (router/api_key_auth.h) to finish with.
  grpc::Status Authenticate(const grpc::CallbackServerContext& ctx) const;

  const RouterContext rc_;
};

}  // namespace pkv::router
