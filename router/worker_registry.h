// The router's view of its workers: one gRPC channel each (keepalive per RELIABILITY.md 3.0),
// health, load and model info, polled in the background.
//
// A worker is *healthy* (placeable) when its last grpc.health.v1 Check of
// options.worker_health_service said SERVING, its last load report was not draining, and its
// ModelInfo is known (fetched on every unhealthy -> healthy transition, so a restarted worker's
// model is re-read). unhealthy_threshold consecutive failed Checks (each with a
// health_timeout_ms deadline), an explicit NOT_SERVING, or ReportUnavailable() make it unhealthy.
//
// Threads: one poll thread issues async probes every interval; their callbacks (gRPC threads)
// update state under mu_. All public methods are thread-safe and non-blocking. The on_change
// listener runs outside mu_, serialised, with fresh counts, whenever healthiness changes.
// The static worker list is fixed at construction; indices are stable for the registry's life.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "router/placement.h"
#include "router/router_options.h"

namespace pkv::router {

namespace internal {
// One outstanding probe RPC (health, load, model info). Shared between the registry's table of
// outstanding probes (so Stop can cancel it) and the RPC's completion callback.
struct RegistryProbe {
  grpc::ClientContext ctx;
  virtual ~RegistryProbe() = default;
};
}  // namespace internal

class WorkerRegistry {
 public:
  // Called with the number of healthy and unhealthy workers after any change.
  using ChangeListener = std::function<void(int healthy, int unhealthy)>;

  WorkerRegistry(const RouterOptions& options, ChangeListener on_change);
  // Stops polling, cancels outstanding probes and waits for their callbacks.
  ~WorkerRegistry();
  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  // Starts the poll thread (the first probe round runs at once).
  void Start();
  void Stop();

  int size() const { return static_cast<int>(workers_.size()); }
  const std::string& address(int w) const { return workers_[w]->address; }
  pkv::v1::Worker::Stub* stub(int w) const { return workers_[w]->stub.get(); }

  bool IsHealthy(int w) const;
  int num_healthy() const;
  // Worker id the worker reported (Load or Accepted), else its address.
  std::string WorkerId(int w) const;
  // Placement inputs for every worker.
  std::vector<WorkerLoad> Loads() const;
  // ModelInfo of some healthy worker (the lowest index); nullopt when none is healthy.
  std::optional<pkv::v1::ModelInfo> AnyModelInfo() const;

  // Router streams currently open to worker w (part of its load).
  void AddInflight(int w, int delta) { workers_[w]->router_inflight.fetch_add(delta); }
  int inflight(int w) const { return workers_[w]->router_inflight.load(); }
  // Passive health: a Generate failed with UNAVAILABLE before any message (connection refused,
  // draining). Marks w unhealthy until its next SERVING Check.
  void ReportUnavailable(int w);

 private:
  struct Worker {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pkv::v1::Worker::Stub> stub;
    std::unique_ptr<grpc::health::v1::Health::Stub> health;
    std::atomic<int> router_inflight{0};
    // Guarded by WorkerRegistry::mu_.
    bool serving = false;
    int failed_checks = 0;
    bool draining = false;
    std::optional<pkv::v1::ModelInfo> model;
    bool check_pending = false;
    bool load_pending = false;
    bool model_pending = false;
    uint64_t reported_load = 0;  // running + waiting
    std::string worker_id;
  };

  bool HealthyLocked(const Worker& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return w.serving && !w.draining && w.model.has_value();
  }
  void PollLoop();
  void ProbeHealth(int w);
  void ProbeLoad(int w);
  void FetchModelInfo(int w);
  void OnCheckDone(int w, const grpc::Status& status,
                   grpc::health::v1::HealthCheckResponse::ServingStatus serving);
  void OnLoadDone(int w, const grpc::Status& status, const pkv::v1::Load& load);
  void OnModelInfoDone(int w, const grpc::Status& status, const pkv::v1::ModelInfo& model);
  void MarkNotServingLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unregister(internal::RegistryProbe* probe);
  void NotifyChange();

  const RouterOptions options_;
  const ChangeListener on_change_;
  std::vector<std::unique_ptr<Worker>> workers_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<internal::RegistryProbe*, std::shared_ptr<internal::RegistryProbe>> probes_
      ABSL_GUARDED_BY(mu_);
  absl::Mutex listener_mu_;  // serialises on_change_ calls
  std::thread poller_;
};

}  // namespace pkv::router
