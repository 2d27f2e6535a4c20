// The router's DirectWorker (router/direct_worker.h) over the worker in this process: a Generate
// the router places here goes straight into WorkerService::SubmitInProcess (Engine::Submit, the
// stream's progress for GetProgress) and the engine's output comes back through a RequestSink
// that hands each message to the router's DirectStreamSink on the engine's thread. No gRPC, no
// serialization, no thread hand-off between the engine and the router's relay.
//
// Cancel and deadlines behave as over gRPC: the router's cancel marks the sink broken and cancels
// the engine's request (pages freed within a step), counted as the deadline's when it comes within
// StreamOutbox::kDeadlineSlack of the deadline, else as a client cancel; the engine drops a request
// past its deadline by itself. There is no slow-consumer bound (the worker's outbox has one):
// the router never pushes back, it coalesces chunks for a slow client.
//
// Thread-safe. REQUIRES: `service` outlives this object and every generation it returned.
#pragma once

#include <memory>

#include "router/direct_worker.h"
#include "worker/service/worker_service.h"

namespace pkv::colocated {

class ServiceDirectWorker final : public router::DirectWorker {
 public:
  explicit ServiceDirectWorker(WorkerService* service) : service_(service) {}

  absl::StatusOr<std::unique_ptr<router::DirectGeneration>> Generate(
      const pkv::v1::WorkerGenerateRequest& request, absl::Time deadline,
      std::shared_ptr<router::DirectStreamSink> sink) override;

 private:
  WorkerService* const service_;
};

}  // namespace pkv::colocated
