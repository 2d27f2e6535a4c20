// The pkv-worker process: serve pkv.v1.Worker + grpc.health.v1 on --listen and Prometheus
// /metrics on --metrics_listen, load the model, run the engine, and drain on SIGTERM or Drain.
//
// Health (worker_health.h): "" is liveness (SERVING while the process serves gRPC, NOT_SERVING
// after a fatal error); "pkv.v1.Worker" is readiness (SERVING once the engine runs, NOT_SERVING
// from the first moment of a drain, after a fatal backend error, or while the engine is stalled
// longer than engine_stall_timeout).
// Drain: stop admitting (UNAVAILABLE), let in-flight requests finish for up to the drain timeout,
// abort the rest with UNAVAILABLE (the router migrates them), shut the server down, exit 0.
// A fatal backend error fails every request with INTERNAL and exits 1 for a supervisor to restart.
//
// WorkerHooks let a process host more than the worker (colocated/: the router in the worker's
// process): it is told when the worker's gRPC server serves, and shuts its part down before the
// worker stops admitting.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "prometheus/registry.h"
#include "worker/service/worker_options.h"
#include "worker/service/worker_service.h"

namespace pkv {

struct WorkerHooks {
  // Once the gRPC server and /metrics serve (liveness SERVING, readiness not yet: the model loads
  // after it). `server` and `service` (its pkv.v1.Worker, also callable in-process) live until
  // RunWorker returns, `registry` is what /metrics serves. An error stops the worker (exit code
  // 1). Null: nothing.
  std::function<absl::Status(grpc::Server& server, WorkerService& service,
                             prometheus::Registry& registry)>
      on_serving;
  // On SIGTERM, a Drain RPC or a fatal error, after readiness went NOT_SERVING and before the
  // engine stops admitting: what the hook started finishes its streams (on this worker too) for
  // up to `drain_timeout` and stops. Null: nothing.
  std::function<void(absl::Duration drain_timeout)> on_shutdown;
};

// Runs the worker until shutdown; returns the process exit code.
int RunWorker(const WorkerOptions& options, const WorkerHooks& hooks = {});

}  // namespace pkv
