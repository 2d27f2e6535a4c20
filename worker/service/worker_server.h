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
#pragma once

#include "worker/service/worker_options.h"

namespace pkv {

// Runs the worker until shutdown; returns the process exit code.
int RunWorker(const WorkerOptions& options);

}  // namespace pkv
