#include "router/router_metrics.h"

#include "common/grpc_status.h"

namespace pkv::router {
namespace {

// Seconds. TTFT spans a cached short prompt on a GPU (ms) to a long CPU prefill behind a queue.
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// The router's own share of a first token is tens of microseconds; the worker's spans prefill.
const prometheus::Histogram::BucketBoundaries kStageBuckets = {
    25e-6,  50e-6, 100e-6, 200e-6, 400e-6, 800e-6, 0.0016, 0.0032, 0.0064,
    0.0128, 0.025, 0.05,   0.1,    0.25,   1,      5,      30};
// Whole streams: up to minutes for long generations on the CPU backend.
const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

prometheus::Histogram& AddHistogram(prometheus::Registry& registry, const char* name,
                                    const char* help,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

prometheus::Counter& AddCounter(prometheus::Registry& registry, const char* name,
                                const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

// Registering the same name twice returns the same family (the registry merges by default).
prometheus::Family<prometheus::Gauge>& WorkersFamily(prometheus::Registry& registry) {
  return prometheus::BuildGauge()
      .Name("pkv_router_workers")
      .Help("Workers by state (healthy = placeable)")
      .Register(registry);
}

}  // namespace

RouterMetrics::RouterMetrics(prometheus::Registry& registry)
    : request_duration_(AddHistogram(registry, "pkv_router_request_duration_seconds",
                                     "Generate stream duration at the router, any outcome",
                                     kDurationBuckets)),
      time_to_first_token_(AddHistogram(registry, "pkv_router_time_to_first_token_seconds",
                                        "From stream start at the router to the first chunk",
                                        kTtftBuckets)),
      failovers_(AddCounter(registry, "pkv_router_failovers_total",
                            "Re-placements of a request on another worker before its first token")),
      ejections_(AddCounter(registry, "pkv_router_worker_ejections_total",
                            "Workers ejected by their circuit breaker (lost stream, refused "
                            "connection or failed health checks)")),
      prefix_queried_blocks_(
          AddCounter(registry, "pkv_router_prefix_queried_blocks_total",
                     "Prompt prefix blocks looked up by prefix-aware placement")),
      prefix_hit_blocks_(AddCounter(registry, "pkv_router_prefix_estimated_hit_blocks_total",
                                    "Prompt prefix blocks the chosen worker likely caches")),
      worker_placements_(prometheus::BuildCounter()
                             .Name("pkv_router_worker_placements_total")
                             .Help("Placements per worker (label: the worker's address)")
                             .Register(registry)),
      auth_failures_(AddCounter(registry, "pkv_router_auth_failures_total",
                                "Calls refused for a missing or invalid API key")),
      slow_client_cancels_(AddCounter(registry, "pkv_router_slow_client_cancels_total",
                                      "Streams cancelled because the client stopped reading")),
      workers_healthy_(WorkersFamily(registry).Add({{"state", "healthy"}})),
      workers_unhealthy_(WorkersFamily(registry).Add({{"state", "unhealthy"}})),
      inflight_(AddGauge(registry, "pkv_router_inflight", "Generate streams holding a slot")),
      queue_depth_(AddGauge(registry, "pkv_router_queue_depth",
                            "Generate streams waiting for an admission slot")) {
  auto& requests = prometheus::BuildCounter()
                       .Name("pkv_router_requests_total")
                       .Help("Finished Generate streams by gRPC status code")
                       .Register(registry);
  for (int code = 0; code < kNumCodes; ++code) {
    requests_by_code_[code] =
        &requests.Add({{"code", StatusCodeName(static_cast<absl::StatusCode>(code))}});
  }
  auto& placements = prometheus::BuildCounter()
                         .Name("pkv_router_placements_total")
                         .Help("Worker placements by reason")
                         .Register(registry);
  for (int r = 0; r < kNumPlacementReasons; ++r) {
    placements_[r] =
        &placements.Add({{"reason", PlacementReasonName(static_cast<PlacementReason>(r))}});
  }
  auto& stages = prometheus::BuildHistogram()
                     .Name("pkv_router_first_token_stage_seconds")
                     .Help(
                         "A first token's time at the router by stage: admit (start to worker "
                         "call), worker (call to first chunk), relay (chunk to client write)")
                     .Register(registry);
  const char* stage_names[] = {"admit", "worker", "relay"};
  for (int s = 0; s < 3; ++s) {
    first_token_stages_[s] = &stages.Add({{"stage", stage_names[s]}}, kStageBuckets);
  }
  auto& rejections = prometheus::BuildCounter()
                         .Name("pkv_router_admission_rejected_total")
                         .Help("Generate calls refused by admission control")
                         .Register(registry);
  rejections_[0] = &rejections.Add({{"reason", "queue_full"}});
  rejections_[1] = &rejections.Add({{"reason", "queue_timeout"}});
  rejections_[2] = &rejections.Add({{"reason", "draining"}});
  rejections_[3] = &rejections.Add({{"reason", "connection_limit"}});
  auto& migrations = prometheus::BuildCounter()
                         .Name("pkv_router_migrations_total")
                         .Help(
                             "Streams moved to another worker after theirs was lost, by phase "
                             "(before_first_token: accepted but no token yet; mid_stream: "
                             "tokens sent, prompt + tokens replayed)")
                         .Register(registry);
  migrations_[0] = &migrations.Add({{"phase", "before_first_token"}});
  migrations_[1] = &migrations.Add({{"phase", "mid_stream"}});
  auto& stall_checks = prometheus::BuildCounter()
                           .Name("pkv_router_stall_checks_total")
                           .Help(
                               "Progress checks of worker streams silent for the stall timeout, "
                               "by verdict (progress: output on its way or the stream spoke; "
                               "waiting: queued at the worker; convicted: the worker failed)")
                           .Register(registry);
  stall_checks_[0] = &stall_checks.Add({{"verdict", "progress"}});
  stall_checks_[1] = &stall_checks.Add({{"verdict", "waiting"}});
  stall_checks_[2] = &stall_checks.Add({{"verdict", "convicted"}});
  prometheus::BuildGauge()
      .Name("pkv_build_info")
      .Help("Constant 1, labelled with the build")
      .Register(registry)
      .Add({{"version", "0.1.0"}, {"component", "router"}})
      .Set(1);
}

prometheus::Counter* RouterMetrics::AddWorkerPlacementCounter(const std::string& address) {
  return &worker_placements_.Add({{"worker", address}});
}

void RouterMetrics::RemoveWorkerPlacementCounter(prometheus::Counter* counter) {
  if (counter != nullptr) worker_placements_.Remove(counter);
}

void RouterMetrics::RecordRequest(absl::StatusCode code, double duration_seconds) {
  const int index = static_cast<int>(code);
  requests_by_code_[index >= 0 && index < kNumCodes ? index : 2]->Increment();  // 2 = UNKNOWN
  request_duration_.Observe(duration_seconds);
}

void RouterMetrics::RecordTimeToFirstToken(double seconds) {
  time_to_first_token_.Observe(seconds);
}

void RouterMetrics::RecordPlacement(PlacementReason reason) {
  placements_[static_cast<int>(reason)]->Increment();
}

void RouterMetrics::RecordRejection(Rejection reason) {
  rejections_[static_cast<int>(reason)]->Increment();
}

void RouterMetrics::SetWorkers(int healthy, int unhealthy) {
  workers_healthy_.Set(healthy);
  workers_unhealthy_.Set(unhealthy);
}

}  // namespace pkv::router
