// The router's view of its workers: one gRPC channel each (keepalive per RELIABILITY.md 3.0),
// health, load and model info, polled in the background, a circuit breaker per worker, and the
// worker set itself (the static --workers list plus workers discovered from DNS).
//
// A worker is *healthy* (placeable) when it is not removed, its breaker is closed, its last
// grpc.health.v1 Check of options.worker_health_service said SERVING, its last load report was
// not draining, and its ModelInfo is known (fetched on every unhealthy -> healthy transition, so a
// restarted worker's model is re-read). It stops being healthy on an explicit NOT_SERVING, and is
// *ejected* (breaker open, router/circuit_breaker.h) by unhealthy_threshold consecutive failed
// Checks or at once by ReportLost() (a stream found it dead, stalled, refusing or draining). An
// ejected worker gets no placements and no probes until its breaker's reopen time; then one
// half-open Check decides.
//
// Worker set: index w names a slot. Static workers hold their slots for the registry's life.
// SetDiscovered() adds DNS workers and *removes* discovered ones DNS no longer lists: a removed
// worker is never placed again; once its last stream ended it is *retired* (channel released,
// placement counter dropped). A retired slot is reused by an address that comes back, or after
// kSlotReuseGrace by a new one, so the slots stay bounded by options.max_workers. Every probe
// carries its slot's generation, so an answer for a slot's previous occupant is ignored.
//
// In-process workers (colocated/): a worker in the router's own process, reached over its
// grpc::Server's in-process channel instead of TCP, and with a DirectWorker its Generate streams
// by a direct call into its engine (router/direct_worker.h). It is a static worker like any other
// (health, load, breaker, stall checks, cancel, deadlines), named by a label instead of an
// address.
//
// Threads: one poll thread issues async probes every interval and retires idle removed workers;
// probe callbacks (gRPC threads) update state under mu_. All public methods are thread-safe and
// non-blocking. The on_change listener runs outside mu_, serialised, with fresh counts, whenever
// healthiness or membership changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "prometheus/counter.h"
#include "router/circuit_breaker.h"
#include "router/direct_worker.h"
#include "router/placement.h"
#include "router/router_metrics.h"
#include "router/router_options.h"

namespace pkv::router {

// A worker in this process: `channel` comes from its grpc::Server::InProcessChannel; `name` is its
// label in logs and metrics (e.g. "direct:127.0.0.1:50061"). With `direct`, Generate streams call
// its engine directly and only the other RPCs use `channel`; null: Generate over `channel` too.
struct InProcessWorker {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<DirectWorker> direct;
};

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
  // Called with the number of healthy and unhealthy (active, not healthy) workers after a change.
  using ChangeListener = std::function<void(int healthy, int unhealthy)>;
  using StubPtr = std::shared_ptr<pkv::v1::Worker::Stub>;

  // A retired slot is reused for a new address only after this long (no stale index survives it).
  static constexpr absl::Duration kSlotReuseGrace = absl::Seconds(60);

  // `credentials` secure every worker channel (router_tls.h: mutual TLS, or plaintext) but those
  // of `in_process` workers, which take the slots after options.workers.
  WorkerRegistry(const RouterOptions& options, ChangeListener on_change,
                 std::shared_ptr<grpc::ChannelCredentials> credentials,
                 std::vector<InProcessWorker> in_process = {});
  // Stops polling, cancels outstanding probes and waits for their callbacks.
  ~WorkerRegistry();
  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  // Ejections and per-worker placements are counted there; call before Start (null: not counted).
  void SetMetrics(RouterMetrics* metrics);
  // Starts the poll thread (the first probe round runs at once).
  void Start();
  void Stop();

  // Active (not removed) workers.
  int size() const;
  // Slots in use or retired: every index w is below this.
  int num_slots() const;
  std::string address(int w) const;
  // w's stub; nullptr once w is retired.
  StubPtr stub(int w) const;

  bool IsHealthy(int w) const;
  int num_healthy() const;
  // Workers out of rotation while a health check verifies them (ReportLost).
  int num_suspect() const;
  // Worker id the worker reported (Load or Accepted), else its address.
  std::string WorkerId(int w) const;
  // Placement inputs for every active worker.
  std::vector<WorkerLoad> Loads() const;
  // ModelInfo of some healthy worker (the lowest index); nullopt when none is healthy.
  std::optional<pkv::v1::ModelInfo> AnyModelInfo() const;

  // What a stream calls on w: the stub (every RPC), and for a direct in-process worker the
  // entry that replaces the Generate RPC (null otherwise).
  struct CallTarget {
    StubPtr stub;  // null: w was removed since it was placed (place again)
    std::shared_ptr<DirectWorker> direct;
  };
  // A stream starts on w: counts it in w's load and placements and returns what to call; a null
  // stub when w was removed since it was placed. Pair with EndCall (not after a null stub).
  CallTarget BeginCall(int w);
  void EndCall(int w);
  int inflight(int w) const;

  // Passive health: a stream on w was lost (connection refused or reset, no answer to a progress
  // check). That may be the router's own fault (a transport it tore down after being starved or
  // paused), so w only leaves rotation at once (suspect) while a health check verifies it: w is
  // ejected when the check fails, and back in rotation, not ejected, when it answers. No-op when
  // already ejected or suspect; `why` is logged.
  void ReportLost(int w, absl::string_view why);
  // The worker's own answer proved the failure (its engine is wedged, its stream output never
  // comes): ejects w at once (no-op when already ejected).
  void ReportFailed(int w, absl::string_view why);

  // DNS discovery: the full current answer (worker_membership.cc). See the header comment.
  void SetDiscovered(const std::vector<std::string>& addresses);

 private:
  struct Worker {
    std::string address;
    uint64_t generation = 0;  // bumped whenever the slot gets a (new) channel
    bool is_static = false;
    // An in-process worker's channel (used instead of a TCP one) and, when its Generate streams
    // call it directly, its DirectWorker; null for every other worker.
    std::shared_ptr<grpc::Channel> in_process_channel;
    std::shared_ptr<DirectWorker> direct;
    bool removed = false;  // discovered, then no longer listed: never placed again
    bool retired = false;  // removed and idle: no channel; the slot may be reused
    absl::Time retired_at = absl::InfinitePast();
    std::shared_ptr<grpc::Channel> channel;
    StubPtr stub;
    std::shared_ptr<grpc::health::v1::Health::Stub> health;
    prometheus::Counter* placements = nullptr;  // pkv_router_worker_placements_total child
    int inflight = 0;                           // router streams open to it
    CircuitBreaker breaker;
    bool serving = false;
    int failed_checks = 0;
    bool draining = false;
    std::optional<pkv::v1::ModelInfo> model;
    bool check_pending = false;
    bool load_pending = false;
    bool model_pending = false;
    bool logged_down = false;    // said once per outage why it is not used
    bool suspect = false;        // a stream reported it lost; a verifying health check is out
    uint64_t reported_load = 0;  // running + waiting
    std::string worker_id;
  };

  bool HealthyLocked(const Worker& w) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !w.removed && !w.suspect && w.breaker.closed() && w.serving && !w.draining &&
           w.model.has_value();
  }
  int NumHealthyLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int NumActiveLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void PollLoop();
  // worker_probes.cc. `regular`: the health interval came (probe closed breakers too); between
  // rounds only ejected workers whose reopen time came get their half-open probe.
  void ProbeHealth(int w, bool regular);
  void ProbeLoad(int w);
  void FetchModelInfo(int w, uint64_t generation);
  // ReportLost's check: a health Check with a generous deadline; ejects w only if it fails.
  void VerifyLost(int w, uint64_t generation, std::string why);
  void OnVerifyDone(int w, uint64_t generation, const grpc::Status& status,
                    grpc::health::v1::HealthCheckResponse::ServingStatus serving,
                    const std::string& why);
  void OnCheckDone(int w, uint64_t generation, const grpc::Status& status,
                   grpc::health::v1::HealthCheckResponse::ServingStatus serving);
  void OnLoadDone(int w, uint64_t generation, const grpc::Status& status,
                  const pkv::v1::Load& load);
  void OnModelInfoDone(int w, uint64_t generation, const grpc::Status& status,
                       const pkv::v1::ModelInfo& model);
  void MarkNotServingLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens w's breaker; true when this ejected a closed worker.
  bool TripLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unregister(internal::RegistryProbe* probe);
  void NotifyChange();
  // worker_membership.cc
  // Gives `address` a slot (reusing its old one, then an old retired one) with a fresh channel.
  // -1 when max_workers slots are all in use.
  // `in_process_channel`: see Worker; null for a TCP worker.
  int AddWorkerLocked(const std::string& address, bool is_static,
                      std::shared_ptr<grpc::Channel> in_process_channel = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ConnectLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetireIdleLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RouterOptions options_;
  const ChangeListener on_change_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;  // every worker channel's
  RouterMetrics* metrics_ = nullptr;                             // set before Start

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);  // slots; never shrinks
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);                           // breaker jitter
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<internal::RegistryProbe*, std::shared_ptr<internal::RegistryProbe>> probes_
      ABSL_GUARDED_BY(mu_);
  absl::Mutex listener_mu_;  // serialises on_change_ calls
  std::thread poller_;
};

}  // namespace pkv::router
