// Prometheus metrics of the router (DESIGN.md "Metrics"). Every family and every labelled child is
// created in the constructor and kept by reference, so the hot path only bumps atomics; labels are
// low-cardinality (status code, placement reason, worker state), never a request id.
//
// Thread-safe (prometheus-cpp metrics are atomic). The registry is owned by the caller and must
// outlive this object; the binary serves it on --metrics_listen through prometheus::Exposer,
// never on the gRPC port.
#pragma once

#include <array>
#include <string>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "router/placement.h"

namespace pkv::router {

class RouterMetrics {
 public:
  // kConnectionLimit: a stream of a client connection over its open/reset rate (being closed).
  enum class Rejection { kQueueFull = 0, kQueueTimeout = 1, kDraining = 2, kConnectionLimit = 3 };

  explicit RouterMetrics(prometheus::Registry& registry);
  RouterMetrics(const RouterMetrics&) = delete;
  RouterMetrics& operator=(const RouterMetrics&) = delete;

  // One call per finished Generate stream: pkv_router_requests_total{code} and
  // pkv_router_request_duration_seconds.
  void RecordRequest(absl::StatusCode code, double duration_seconds);
  void RecordTimeToFirstToken(double seconds);
  // Where a first token's time at the router goes (pkv_router_first_token_stage_seconds{stage}):
  // admit = stream start to the first worker call (validation, admission queue, placement);
  // worker = that call's start to the first chunk's arrival (the worker's queue and prefill plus
  // both gRPC hops); relay = the chunk's arrival to gRPC taking its write to the client.
  enum class FirstTokenStage { kAdmit = 0, kWorker = 1, kRelay = 2 };
  void RecordFirstTokenStage(FirstTokenStage stage, double seconds) {
    first_token_stages_[static_cast<int>(stage)]->Observe(seconds);
  }
  void RecordPlacement(PlacementReason reason);
  void RecordFailover() { failovers_.Increment(); }
  // Streams moved to another worker after their worker was lost: before the first token (it had
  // accepted the request: queued or prefilling) or mid-stream (tokens were sent; replayed).
  enum class MigrationPhase { kBeforeFirstToken = 0, kMidStream = 1 };
  void RecordMigration(MigrationPhase phase) { migrations_[static_cast<int>(phase)]->Increment(); }
  // A progress check of a silent worker stream and its verdict (generate_stream.h).
  enum class StallVerdict { kProgress = 0, kWaiting = 1, kConvicted = 2 };
  void RecordStallCheck(StallVerdict verdict) {
    stall_checks_[static_cast<int>(verdict)]->Increment();
  }
  // A worker's circuit breaker opened (router/circuit_breaker.h).
  void RecordEjection() { ejections_.Increment(); }
  // Prefix-aware placement: the prompt's blocks looked up, and those the chosen worker likely
  // caches (the router's estimated prefix-cache hit; router/prefix_index.h).
  void RecordPrefixEstimate(int64_t queried_blocks, int64_t hit_blocks) {
    prefix_queried_blocks_.Increment(static_cast<double>(queried_blocks));
    prefix_hit_blocks_.Increment(static_cast<double>(hit_blocks));
  }
  // pkv_router_worker_placements_total{worker}: one child per worker address, created when the
  // worker is added (never on the hot path) and removed with it, so the label set stays bounded
  // by the number of workers.
  prometheus::Counter* AddWorkerPlacementCounter(const std::string& address);
  void RemoveWorkerPlacementCounter(prometheus::Counter* counter);
  void RecordRejection(Rejection reason);
  // A call refused for a missing or invalid API key (any method).
  void RecordAuthFailure() { auth_failures_.Increment(); }
  // A stream cancelled because its client left a write unread for client_write_timeout.
  void RecordSlowClientCancel() { slow_client_cancels_.Increment(); }
  void SetWorkers(int healthy, int unhealthy);
  void SetInflight(int inflight) { inflight_.Set(inflight); }
  void SetQueueDepth(int depth) { queue_depth_.Set(depth); }

 private:
  static constexpr int kNumCodes = 17;  // absl/gRPC canonical codes 0..16

  std::array<prometheus::Counter*, kNumCodes> requests_by_code_{};
  prometheus::Histogram& request_duration_;
  prometheus::Histogram& time_to_first_token_;
  std::array<prometheus::Histogram*, 3> first_token_stages_{};
  std::array<prometheus::Counter*, kNumPlacementReasons> placements_{};
  std::array<prometheus::Counter*, 4> rejections_{};
  prometheus::Counter& failovers_;
  std::array<prometheus::Counter*, 2> migrations_{};
  std::array<prometheus::Counter*, 3> stall_checks_{};
  prometheus::Counter& ejections_;
  prometheus::Counter& prefix_queried_blocks_;
  prometheus::Counter& prefix_hit_blocks_;
  prometheus::Family<prometheus::Counter>& worker_placements_;
  prometheus::Counter& auth_failures_;
  prometheus::Counter& slow_client_cancels_;
  prometheus::Gauge& workers_healthy_;
  prometheus::Gauge& workers_unhealthy_;
  prometheus::Gauge& inflight_;
  prometheus::Gauge& queue_depth_;
};

}  // namespace pkv::router
