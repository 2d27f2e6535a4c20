// RunWorker as the steps of a worker's life: check the options, start the /metrics and gRPC
// servers, load the model and start the engine, serve until shutdown, then drain (or stop after a
// fatal backend error). The order matters: liveness answers while the model loads, readiness only
// once the engine runs.
#include "worker/service/worker_server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/shutdown_signal.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "metrics/metrics_server.h"
#include "prometheus/registry.h"
#include "worker/engine/engine.h"
#include "worker/engine/test_faults.h"
#include "worker/engine/worker_metrics.h"
#include "worker/service/load_model.h"
#include "worker/service/worker_health.h"
#include "worker/service/worker_service.h"

namespace pkv {
namespace {

std::string PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(colon + 1);
}

// One worker process. Members are declared in start-up order, so they are destroyed in reverse:
// the engine stops before the servers and the metrics it reports into go away.
class WorkerProcess {
 public:
  WorkerProcess(const WorkerOptions& o, const WorkerHooks& hooks)
      : o_(o),
        hooks_(hooks),
        worker_id_(o.worker_id.empty() ? "worker-" + PortOf(o.listen) : o.worker_id),
        drain_timeout_s_(absl::ToDoubleSeconds(o.drain_timeout)) {}

  // The options, the test faults they name and the TLS credentials (exit code 2 when bad).
  absl::Status CheckOptions();
  // The /metrics endpoint and the gRPC server, liveness SERVING, readiness not yet (exit 1).
  absl::Status StartServers();
  // The model, the engine over it, then readiness SERVING (exit 1; the server is shut down).
  absl::Status StartEngine();
  // Blocks until SIGTERM, a Drain RPC or a fatal error; returns the process's exit code.
  int ServeUntilShutdown();

  const std::string& worker_id() const { return worker_id_; }
  // After a failed start: stops what the hooks started (no drain), then the server.
  void Abandon() {
    if (hooks_.on_shutdown) hooks_.on_shutdown(absl::ZeroDuration());
    if (server_ != nullptr) server_->Shutdown();
  }

 private:
  int StopAfterFatal(const std::string& reason);
  int Drain(const std::string& reason);

  ShutdownSignal shutdown_;  // first: blocks SIGTERM/SIGINT before any other thread starts
  const WorkerOptions& o_;
  const WorkerHooks& hooks_;
  const std::string worker_id_;
  TestFaults faults_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> metrics_server_;
  std::atomic<double> drain_timeout_s_;  // the option, or what a Drain RPC asked for
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::atomic<bool> fatal_{false};
  std::unique_ptr<Engine> engine_;
};

absl::Status WorkerProcess::CheckOptions() {
  PKV_RETURN_IF_ERROR(ValidateWorkerOptions(o_));
  PKV_ASSIGN_OR_RETURN(faults_, ParseTestFaults(o_.test_fault));
  if (faults_.any() && !o_.enable_test_faults) {
    return absl::InvalidArgumentError("--test_fault is refused without --enable_test_faults");
  }
  PKV_ASSIGN_OR_RETURN(credentials_, WorkerServerCredentials(o_.security));
  return absl::OkStatus();
}

absl::Status WorkerProcess::StartServers() {
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      MetricsServer::Start(o_.metrics_listen, registry_);
  if (!metrics_server.ok()) {
    return absl::Status(
        metrics_server.status().code(),
        absl::StrCat(metrics_server.status().message(), " (pick another --metrics_listen)"));
  }
  metrics_server_ = *std::move(metrics_server);
  service_ = std::make_unique<WorkerService>(worker_id_, [this](double timeout_s) {
    if (timeout_s > 0) drain_timeout_s_.store(timeout_s);
    shutdown_.Request("Drain RPC");
  });
  service_->SetPeerPolicy(PeerPolicy(o_.security));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(o_.listen, credentials_, &bound_port);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(o_.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, o_.max_metadata_bytes);
  // Let the router's keepalive pings (1 s, also without calls) through: RELIABILITY.md 3.0.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o_.listen, " (address in use?)"));
  }
  SetWorkerLiveness(server_.get(), true);    // the process serves gRPC (worker_health.h)
  SetWorkerReadiness(server_.get(), false);  // not until the model and KV pool are ready
  if (hooks_.on_serving) return hooks_.on_serving(*server_, *service_, *registry_);
  return absl::OkStatus();
}

absl::Status WorkerProcess::StartEngine() {
  PKV_LOG(INFO) << "loading model from " << o_.model_dir;
  PKV_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(o_, faults_));
  metrics_ = std::make_unique<WorkerMetrics>(registry_.get(), worker_id_,
                                             model.backend->backend_name(), o_.model_dir,
                                             KvCacheDtypeName(model.backend->kv_cache_dtype()));
  EngineOptions eo;
  eo.worker_id = worker_id_;
  eo.model_name = o_.model_dir;
  eo.max_context = model.max_context;
  eo.scheduler = o_.Scheduler(model.backend->page_size());
  eo.chat = ChatPromptRenderer::Load(o_.model_dir);
  PKV_ASSIGN_OR_RETURN(eo.overlap_steps,
                       PipelineSteps(o_.overlap_steps, model.backend->overlaps_steps()));
  if (eo.overlap_steps && !model.backend->overlaps_steps()) {
    PKV_LOG(INFO) << "--overlap_steps=on: the " << model.backend->backend_name()
                  << " backend runs each step inside its launch, so steps do not overlap here";
  }
  eo.on_fatal = [this](absl::Status st) {
    fatal_.store(true);
    shutdown_.Request(absl::StrCat("fatal backend error: ", st.message()));
  };
  engine_ = std::make_unique<Engine>(std::move(eo), std::move(model.backend),
                                     std::move(model.tokenizer), metrics_.get());
  engine_->Start();
  service_->SetEngine(engine_.get());
  SetWorkerReadiness(server_.get(), true);
  PKV_LOG(INFO) << "ready on " << o_.listen << " (" << WorkerSecuritySummary(o_.security)
                << ", metrics " << o_.metrics_listen << ", backend "
                << engine_->backend().backend_name() << ", " << engine_->backend().num_kv_pages()
                << " KV pages, max context " << model.max_context << ")";
  return absl::OkStatus();
}

int WorkerProcess::ServeUntilShutdown() {
  const std::string reason =
      WaitForShutdownWatchingEngine(shutdown_, *engine_, server_.get(), o_.engine_stall_timeout);
  SetWorkerReadiness(server_.get(), false);  // SIGTERM, Drain or fatal: no new work, at once
  if (hooks_.on_shutdown) hooks_.on_shutdown(absl::Seconds(drain_timeout_s_.load()));
  return fatal_.load() ? StopAfterFatal(reason) : Drain(reason);
}

int WorkerProcess::StopAfterFatal(const std::string& reason) {
  SetWorkerLiveness(server_.get(), false);
  PKV_LOG(ERROR) << "stopping: " << reason;
  // In-flight streams already carry their INTERNAL status; give them time to deliver it (a
  // stream cut by the shutdown instead looks like a lost worker and would be migrated).
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  engine_->Stop(absl::InternalError(reason));
  return 1;
}

// Stop admitting, let in-flight requests finish for the drain timeout, abort the rest with
// UNAVAILABLE (the router migrates them), shut the server down.
int WorkerProcess::Drain(const std::string& reason) {
  const double timeout = drain_timeout_s_.load();
  PKV_LOG(INFO) << "draining (" << reason << "), up to " << timeout << " s";
  engine_->BeginDrain();
  if (!engine_->WaitIdle(absl::Now() + absl::Seconds(timeout))) {
    PKV_LOG(WARNING) << "drain timeout: aborting requests still in flight";
    engine_->CancelAll(AbortReason::kShutdown);
    engine_->WaitIdle(absl::Now() + absl::Seconds(2));
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  engine_->Stop(absl::UnavailableError("worker shut down"));
  PKV_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int RunWorker(const WorkerOptions& options, const WorkerHooks& hooks) {
  WorkerProcess worker(options, hooks);
  SetLogTag(worker.worker_id());
  if (absl::Status s = worker.CheckOptions(); !s.ok()) {
    PKV_LOG(ERROR) << s.message();
    return 2;
  }
  if (absl::Status s = worker.StartServers(); !s.ok()) {
    PKV_LOG(ERROR) << s.message();
    worker.Abandon();
    return 1;
  }
  if (absl::Status s = worker.StartEngine(); !s.ok()) {
    PKV_LOG(ERROR) << s.message();
    worker.Abandon();
    return 1;
  }
  return worker.ServeUntilShutdown();
}

}  // namespace pkv
