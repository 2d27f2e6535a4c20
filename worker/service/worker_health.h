// The worker's grpc.health.v1 statuses (README "Reliability", the Helm chart's probes):
//   ""              liveness: SERVING from the moment the gRPC server runs until the process
//                   stops, also while the model loads and while draining (a kubelet must not
//                   restart a worker that is busy finishing its streams); NOT_SERVING after a
//                   fatal backend error. A hung process stops answering altogether.
//   "pkv.v1.Worker" readiness: SERVING once the model and KV pool are ready; NOT_SERVING from the
//                   first moment of a drain, after a fatal backend error, and while the engine is
//                   wedged (requests in flight but no step finished for the stall timeout: a hung
//                   GPU), so the router stops placing there. Load is signalled by
//                   RESOURCE_EXHAUSTED, never by readiness.
// Thread-safe (gRPC's health service is).
#pragma once

#include <string>

#include "absl/time/time.h"
#include "common/shutdown_signal.h"
#include "grpcpp/server.h"
#include "worker/engine/engine.h"

namespace pkv {

inline constexpr char kWorkerReadinessService[] = "pkv.v1.Worker";

void SetWorkerLiveness(grpc::Server* server, bool serving);
void SetWorkerReadiness(grpc::Server* server, bool serving);

// Blocks until shutdown is requested and returns the reason. Meanwhile checks the engine every
// 100 ms and holds readiness NOT_SERVING while it has been stalled for longer than
// `stall_timeout` (zero or negative: no watchdog), SERVING again once it moves.
std::string WaitForShutdownWatchingEngine(ShutdownSignal& shutdown, const Engine& engine,
                                          grpc::Server* server, absl::Duration stall_timeout);

}  // namespace pkv
