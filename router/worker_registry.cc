#include "router/worker_registry.h"

#include <utility>

#include "common/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace pkv::router {
namespace {

std::shared_ptr<grpc::Channel> MakeWorkerChannel(const std::string& address,
                                                 const RouterOptions& options) {
  grpc::ChannelArguments args;
  // Keepalive as a hang detector only works if pings continue while the worker sends nothing:
  // permit pings without calls and lift core's "2 pings without data" cap (RELIABILITY.md 3.0).
  // The worker must accept them (permit without calls, min recv ping interval <= this time).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, options.worker_keepalive_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options.worker_keepalive_timeout_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly to a restarted worker (default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A private subchannel per worker: never share a connection with another channel's settings.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

WorkerRegistry::WorkerRegistry(const RouterOptions& options, ChangeListener on_change)
    : options_(options), on_change_(std::move(on_change)) {
  for (const std::string& address : options_.workers) {
    auto w = std::make_unique<Worker>();
    w->address = address;
    w->channel = MakeWorkerChannel(address, options_);
    w->stub = pkv::v1::Worker::NewStub(w->channel);
    w->health = grpc::health::v1::Health::NewStub(w->channel);
    workers_.push_back(std::move(w));
  }
}

WorkerRegistry::~WorkerRegistry() { Stop(); }

void WorkerRegistry::Start() {
  NotifyChange();
  poller_ = std::thread([this] { PollLoop(); });
}

void WorkerRegistry::Stop() {
  std::vector<std::shared_ptr<internal::RegistryProbe>> outstanding;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (const auto& [ptr, probe] : probes_) outstanding.push_back(probe);
  }
  if (poller_.joinable()) poller_.join();
  // Cancel outside mu_: a cancelled probe's callback may run inline and takes mu_.
  for (const auto& probe : outstanding) probe->ctx.TryCancel();
  outstanding.clear();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return probes_.empty(); };
  mu_.Await(absl::Condition(&idle));
}

void WorkerRegistry::PollLoop() {
  absl::Time next_health = absl::Now();
  absl::Time next_load = next_health;
  const absl::Duration health_interval = absl::Milliseconds(options_.health_interval_ms);
  const absl::Duration load_interval = absl::Milliseconds(options_.load_interval_ms);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time wake = std::min(next_health, next_load);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithDeadline(absl::Condition(&stop), wake);
      if (stopping_) return;
    }
    const absl::Time now = absl::Now();
    if (now >= next_health) {
      for (int w = 0; w < size(); ++w) ProbeHealth(w);
      next_health = now + health_interval;
    }
    if (now >= next_load) {
      for (int w = 0; w < size(); ++w) ProbeLoad(w);
      next_load = now + load_interval;
    }
  }
}

bool WorkerRegistry::IsHealthy(int w) const {
  absl::MutexLock lock(&mu_);
  return HealthyLocked(*workers_[w]);
}

int WorkerRegistry::num_healthy() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& w : workers_) n += HealthyLocked(*w);
  return n;
}

std::string WorkerRegistry::WorkerId(int w) const {
  absl::MutexLock lock(&mu_);
  const Worker& worker = *workers_[w];
  return worker.worker_id.empty() ? worker.address : worker.worker_id;
}

std::vector<WorkerLoad> WorkerRegistry::Loads() const {
  std::vector<WorkerLoad> loads;
  loads.reserve(workers_.size());
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < size(); ++w) {
    const Worker& worker = *workers_[w];
    const int inflight = worker.router_inflight.load();
    loads.push_back(WorkerLoad{w, HealthyLocked(worker),
                               worker.reported_load + static_cast<uint64_t>(inflight)});
  }
  return loads;
}

std::optional<pkv::v1::ModelInfo> WorkerRegistry::AnyModelInfo() const {
  absl::MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (HealthyLocked(*w)) return w->model;
  }
  return std::nullopt;
}

void WorkerRegistry::ReportUnavailable(int w) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    changed = HealthyLocked(worker);
    worker.serving = false;
    worker.failed_checks = options_.unhealthy_threshold;
    worker.model.reset();
  }
  if (changed) {
    PKV_LOG(WARNING) << "worker " << workers_[w]->address
                     << " unhealthy: a Generate call found it unavailable";
    NotifyChange();
  }
}

void WorkerRegistry::NotifyChange() {
  if (!on_change_) return;
  absl::MutexLock serial(&listener_mu_);
  const int healthy = num_healthy();
  on_change_(healthy, size() - healthy);
}

}  // namespace pkv::router
