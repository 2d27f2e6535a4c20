// pkv.v1.Worker over gRPC's callback API. Reactions never block: Generate validates, tokenizes and
// enqueues into the Engine, then returns a reactor that streams what the engine produces.
// Until the model is loaded (SetEngine) every RPC but health answers UNAVAILABLE "loading".
// Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "grpcpp/grpcpp.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "worker/engine/engine.h"
#include "worker/service/stream_progress.h"
#include "worker/service/worker_security.h"

namespace pkv {

class WorkerService final : public pkv::v1::Worker::CallbackService {
 public:
  // `on_drain` is called (on a gRPC thread; it must not block) when a Drain RPC arrives.
  WorkerService(std::string worker_id, std::function<void(double timeout_seconds)> on_drain);

  // Who may call (worker_security.h). Set before the server starts; default: plaintext rules.
  void SetPeerPolicy(PeerPolicy policy) { policy_ = std::move(policy); }

  // Makes the service ready. The engine must outlive the server.
  void SetEngine(Engine* engine) { engine_.store(engine); }

  grpc::ServerWriteReactor<pkv::v1::WorkerGenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const pkv::v1::WorkerGenerateRequest* request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const pkv::v1::AbortRequest* request,
                                  pkv::v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const pkv::v1::GetLoadRequest* request,
                                    pkv::v1::Load* response) override;
  // The router's check on a silent stream (worker.proto GetProgress).
  grpc::ServerUnaryReactor* GetProgress(grpc::CallbackServerContext* context,
                                        const pkv::v1::GetProgressRequest* request,
                                        pkv::v1::Progress* response) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* context,
                                  const pkv::v1::DrainRequest* request,
                                  pkv::v1::DrainResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const pkv::v1::GetModelInfoRequest* request,
                                         pkv::v1::ModelInfo* response) override;

 private:
  // A unary RPC: authorization, then `answer` (given the engine, or nullptr while loading) fills
  // the response and returns the status the reactor finishes with.
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, bool admin,
                                   const std::function<grpc::Status(Engine* engine)>& answer);

  const std::string worker_id_;
  std::function<void(double)> on_drain_;
  PeerPolicy policy_;
  StreamProgressTable progress_;  // per request id, for GetProgress
  std::atomic<Engine*> engine_{nullptr};
};

}  // namespace pkv
