// pkv.v1.Worker over gRPC's callback API. Reactions never block: Generate validates, tokenizes and
// enqueues into the Engine, then returns a reactor that streams what the engine produces.
// Until the model is loaded (SetEngine) every RPC but health answers UNAVAILABLE "loading".
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

  // Generate for a caller in this process without gRPC (colocated/: the router's direct calls):
  // what Generate does after authorization (the model loaded, Engine::Submit, the stream's
  // progress registered for GetProgress), with the output going to `sink`. Returns the engine's id
  // for CancelInProcess; an error means nothing was queued (UNAVAILABLE while loading).
  absl::StatusOr<uint64_t> SubmitInProcess(const pkv::v1::WorkerGenerateRequest& request,
                                           absl::Time deadline, std::shared_ptr<RequestSink> sink,
                                           std::shared_ptr<StreamProgress> progress);
  // Engine::Cancel; a no-op while loading.
  void CancelInProcess(uint64_t id, AbortReason reason);
  const std::string& worker_id() const { return worker_id_; }

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

  // Engine::Submit, then the stream's progress registered under its request id (GetProgress).
  absl::StatusOr<uint64_t> Submit(Engine& engine, const pkv::v1::WorkerGenerateRequest& request,
                                  absl::Time deadline, std::shared_ptr<RequestSink> sink,
                                  std::shared_ptr<StreamProgress> progress);

  const std::string worker_id_;
  std::function<void(double)> on_drain_;
  PeerPolicy policy_;
  StreamProgressTable progress_;  // per request id, for GetProgress
  std::atomic<Engine*> engine_{nullptr};
};

}  // namespace pkv
