#include "colocated/colocated_router.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpcpp/support/channel_arguments.h"

namespace pkv::colocated {

std::string InProcessWorkerName(const WorkerOptions& worker, bool direct) {
  return absl::StrCat(direct ? "direct:" : "inproc:", worker.listen);
}

absl::Status ValidateColocated(const router::RouterOptions& router, const WorkerOptions& worker) {
  if (worker.security.tls.any() || router.client_tls.any() || router.worker_tls.any()) {
    return absl::InvalidArgumentError(
        "the colocated router and worker serve plaintext only (--insecure); for TLS run "
        "pkv-router and pkv-worker as separate processes");
  }
  if (router.listen == worker.listen) {
    return absl::InvalidArgumentError(absl::StrCat("--router_listen and --listen are both ",
                                                   worker.listen, "; give them different ports"));
  }
  return absl::OkStatus();
}

ColocatedRouter::~ColocatedRouter() { Stop(absl::ZeroDuration()); }

WorkerHooks ColocatedRouter::Hooks() {
  WorkerHooks hooks;
  hooks.on_serving = [this](grpc::Server& server, WorkerService& service,
                            prometheus::Registry& registry) {
    return Start(server, service, registry);
  };
  hooks.on_shutdown = [this](absl::Duration drain_timeout) { Stop(drain_timeout); };
  return hooks;
}

absl::Status ColocatedRouter::Start(grpc::Server& worker_server, WorkerService& service,
                                    prometheus::Registry& registry) {
  router_ = std::make_unique<router::RouterServer>(options_.router, registry);
  // The channel's arguments are those of the in-process transport; the keepalive of TCP worker
  // channels has nothing to detect here (the worker's server dies with this process).
  router_->AddInProcessWorker(
      {worker_name_, worker_server.InProcessChannel(grpc::ChannelArguments()),
       options_.direct ? std::make_shared<ServiceDirectWorker>(&service) : nullptr});
  absl::Status started = router_->Start();
  if (!started.ok()) {
    router_.reset();
    return absl::Status(started.code(),
                        absl::StrCat("router (the --router_* flags): ", started.message()));
  }
  return absl::OkStatus();
}

void ColocatedRouter::Stop(absl::Duration drain_timeout) {
  if (router_ == nullptr || stopped_) return;
  stopped_ = true;
  PKV_LOG(INFO) << "draining the colocated router before the worker, up to "
                << absl::FormatDuration(drain_timeout);
  const bool drained = router_->Drain(drain_timeout);
  PKV_LOG(INFO) << (drained ? "router drained" : "router drain timed out");
}

}  // namespace pkv::colocated
