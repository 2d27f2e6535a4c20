// The shared parts every Generate stream uses, wired once by RouterServer. Plain struct of
// non-owning pointers; everything it points to outlives every stream (RouterServer drains streams
// before destroying them).
#pragma once

#include <atomic>

#include "router/admission.h"
#include "router/api_key_auth.h"
#include "router/connection_guard.h"
#include "router/placement.h"
#include "router/request_table.h"
#include "router/router_metrics.h"
#include "router/router_options.h"
#include "router/timer_thread.h"
#include "router/worker_registry.h"

namespace pkv::router {

struct RouterContext {
  const RouterOptions* options = nullptr;
  WorkerRegistry* registry = nullptr;
  Placer* placer = nullptr;
  AdmissionController* admission = nullptr;
  TimerThread* timers = nullptr;
  RouterMetrics* metrics = nullptr;
  RequestTable* requests = nullptr;
  IdSource* ids = nullptr;
  LiveCounter* streams = nullptr;               // live GenerateStream objects
  const std::atomic<bool>* draining = nullptr;  // true once SIGTERM began the drain
  const ApiKeyAuthenticator* auth = nullptr;    // null: no API-key authentication
  ConnectionGuard* connections = nullptr;       // per-connection stream and reset limits
};

}  // namespace pkv::router
