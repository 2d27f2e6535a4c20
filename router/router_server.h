// A whole router in one object: the gRPC server (pkv.v1.Generation + grpc.health.v1), worker
// registry, placement, admission, timers and metrics. Used by pkv-router's main and by tests.
//
// Health (grpc::EnableDefaultHealthCheckService), README "Reliability": "" is liveness, SERVING
// from Start() until the server shuts down (also while draining: the process is alive and
// finishing streams); "pkv.v1.Generation" is readiness, SERVING while at least one worker is
// healthy, NOT_SERVING otherwise and for good from the first moment of Drain().
// Workers: the static options.workers plus, with options.workers_dns, the DNS answer re-resolved
// every dns_interval (router/dns_discovery.h).
// Drain(): NOT_SERVING, new Generate calls get UNAVAILABLE, in-flight streams run to completion
// for up to `timeout`, then the server shuts down (the rest are cancelled).
//
// Thread-safety: Start, Drain, Shutdown and the destructor are called from one control thread;
// everything else is internally synchronised. The metrics registry must outlive this object.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "http/http_server.h"
#include "prometheus/registry.h"
#include "router/admission.h"
#include "router/api_key_auth.h"
#include "router/dns_discovery.h"
#include "router/generation_service.h"
#include "router/openai/openai_frontend.h"
#include "router/placement.h"
#include "router/request_table.h"
#include "router/router_context.h"
#include "router/router_metrics.h"
#include "router/router_options.h"
#include "router/timer_thread.h"
#include "router/worker_registry.h"

namespace pkv::router {

class RouterServer {
 public:
  RouterServer(RouterOptions options, prometheus::Registry& metrics_registry);
  ~RouterServer();  // Shutdown() if still running
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // A worker in this process (colocated/), reached over `worker.channel` (its server's in-process
  // channel) beside options.workers. REQUIRES: before Start().
  void AddInProcessWorker(InProcessWorker worker) { in_process_.push_back(std::move(worker)); }

  // Binds options.listen and starts polling workers. Errors: INVALID_ARGUMENT for bad options
  // (including unusable TLS files or API-key file; NOT_FOUND when one cannot be read),
  // UNAVAILABLE when the address cannot be bound.
  absl::Status Start();
  // The bound port (useful with listen port 0).
  int port() const { return port_; }
  // The HTTP API's bound port; 0 when options.http_listen is empty.
  int http_port() const { return http_ == nullptr ? 0 : http_->port(); }

  // Graceful stop (SIGTERM). Returns true when every in-flight stream finished in time.
  bool Drain(absl::Duration timeout);
  // Immediate stop: cancels what runs, waits for the streams to wind down, stops polling.
  void Shutdown();

  WorkerRegistry& registry() { return *registry_; }
  int live_streams() const { return requests_.live_streams(); }
  int healthy_workers() const { return registry_->num_healthy(); }

 private:
  void OnWorkersChanged(int healthy, int unhealthy);
  // The OpenAI-compatible API on options.http_listen, a client of server_ (in-process channel).
  absl::Status StartHttp(const TlsFiles& tls);
  void StopHttp();

  const RouterOptions options_;
  prometheus::Registry& metrics_registry_;
  RouterMetrics metrics_;
  TimerThread timers_;
  AdmissionController admission_;
  Placer placer_;
  RequestTable requests_;
  IdSource ids_;
  ConnectionGuard connections_;
  LiveCounter streams_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<ApiKeyAuthenticator> auth_;  // null: no API keys configured
  std::vector<InProcessWorker> in_process_;    // handed to registry_ by Start()
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<DnsDiscovery> discovery_;  // with options.workers_dns
  std::unique_ptr<GenerationService> service_;

  absl::Mutex health_mu_;  // orders health updates against server creation and drain
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(health_mu_);
  bool serving_ ABSL_GUARDED_BY(health_mu_) = false;
  std::unique_ptr<openai::OpenAiFrontend> openai_;  // with options.http_listen
  std::unique_ptr<http::HttpServer> http_;
  bool stopped_ = false;
  int port_ = 0;
};

}  // namespace pkv::router
