// pkv::colocated: the router and one worker in one process, for a one-GPU box (issue 18: the
// router's cost). By default the router's Generate streams placed on that worker call its engine
// directly (colocated/direct_worker.h: no gRPC between them, the first token written to the client
// from the engine's thread), so the first token crosses one TCP hop (client -> router) and no
// second transport at all. Everything else reaches the worker over its own grpc::Server's
// in-process channel (gRPC's in-process transport): the worker is a normal registry member
// (health, load, drain, prefix index, breaker, stall checks), its own --listen port still serves
// pkv.v1.Worker (so "straight to the worker" stays measurable), and remote workers can be listed
// beside it (RouterOptions::workers / workers_dns). With ColocatedOptions::direct false, Generate
// goes over the in-process channel too (the path before direct calls, kept to measure against).
// Router and worker metrics share the worker's /metrics.
//
// Life: RunWorker(worker_options, colocated.Hooks()) starts the router once the worker's gRPC
// server serves (the router reports NOT_SERVING until the model is loaded and the worker is
// ready), and drains it (new streams UNAVAILABLE, in-flight ones finish on the still-running
// engine) before the worker itself drains.
//
// Security: plaintext only for now (the worker's peer policy has no identity for an in-process
// caller); Validate refuses TLS.
//
// Thread-safety: the hooks run on RunWorker's thread, one after the other; router() is safe to
// read from other threads once on_serving returned.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "colocated/direct_worker.h"
#include "router/router_options.h"
#include "router/router_server.h"
#include "worker/service/worker_options.h"
#include "worker/service/worker_server.h"

namespace pkv::colocated {

struct ColocatedOptions {
  router::RouterOptions router;
  // Generate streams call the worker's engine directly; false: over the in-process gRPC channel.
  bool direct = true;
};

// The in-process worker's label in the router's logs and metrics: "direct:" (direct calls) or
// "inproc:" (in-process gRPC) + its --listen.
std::string InProcessWorkerName(const WorkerOptions& worker, bool direct);

// INVALID_ARGUMENT when the pair cannot run in one process: TLS on either side, or the router's
// and the worker's ports the same.
absl::Status ValidateColocated(const router::RouterOptions& router, const WorkerOptions& worker);

class ColocatedRouter {
 public:
  ColocatedRouter(ColocatedOptions options, std::string worker_name)
      : options_(std::move(options)), worker_name_(std::move(worker_name)) {}
  ~ColocatedRouter();  // shuts the router down if still running
  ColocatedRouter(const ColocatedRouter&) = delete;
  ColocatedRouter& operator=(const ColocatedRouter&) = delete;

  // For RunWorker. REQUIRES: this object outlives the RunWorker call.
  WorkerHooks Hooks();

  // Null before the worker served and after a failed start.
  router::RouterServer* router() { return router_.get(); }

 private:
  absl::Status Start(grpc::Server& worker_server, WorkerService& service,
                     prometheus::Registry& registry);
  void Stop(absl::Duration drain_timeout);

  const ColocatedOptions options_;
  const std::string worker_name_;
  std::unique_ptr<router::RouterServer> router_;
  bool stopped_ = false;
};

}  // namespace pkv::colocated
