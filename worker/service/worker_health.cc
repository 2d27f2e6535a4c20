#include "worker/service/worker_health.h"

#include "common/log.h"
#include "grpcpp/health_check_service_interface.h"

namespace pkv {
namespace {

constexpr absl::Duration kWatchPeriod = absl::Milliseconds(100);

void SetStatus(grpc::Server* server, const char* service, bool serving) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(service, serving);
}

}  // namespace

void SetWorkerLiveness(grpc::Server* server, bool serving) { SetStatus(server, "", serving); }

void SetWorkerReadiness(grpc::Server* server, bool serving) {
  SetStatus(server, kWorkerReadinessService, serving);
}

std::string WaitForShutdownWatchingEngine(ShutdownSignal& shutdown, const Engine& engine,
                                          grpc::Server* server, absl::Duration stall_timeout) {
  bool wedged = false;
  while (true) {
    std::string reason = shutdown.WaitUntil(absl::Now() + kWatchPeriod);
    if (!reason.empty()) return reason;
    if (stall_timeout <= absl::ZeroDuration()) continue;
    const absl::Duration stalled = engine.StalledFor(absl::Now());
    if ((stalled > stall_timeout) == wedged) continue;
    wedged = !wedged;
    SetWorkerReadiness(server, !wedged);
    if (wedged) {
      PKV_LOG(ERROR) << "engine stalled: requests in flight and no step finished for "
                     << absl::FormatDuration(stalled) << "; readiness NOT_SERVING";
    } else {
      PKV_LOG(INFO) << "engine moving again; readiness SERVING";
    }
  }
}

}  // namespace pkv
