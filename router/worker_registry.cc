#include "router/worker_registry.h"

#include <algorithm>
#include <random>
#include <utility>

#include "common/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace pkv::router {
namespace {

std::shared_ptr<grpc::Channel> MakeWorkerChannel(
    const std::string& address, const RouterOptions& options,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  // Keepalive as a hang detector only works if pings continue while the worker sends nothing:
  // permit pings without calls and lift core's "2 pings without data" cap (RELIABILITY.md 3.0).
  // The worker must accept them (permit without calls, min recv ping interval <= this time).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.worker_keepalive)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.worker_keepalive_timeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly to a restarted worker (default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A private subchannel per worker: never share a connection with another channel's settings.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!options.worker_tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.worker_tls_server_name);
  }
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace

WorkerRegistry::WorkerRegistry(const RouterOptions& options, ChangeListener on_change,
                               std::shared_ptr<grpc::ChannelCredentials> credentials,
                               std::vector<InProcessWorker> in_process)
    : options_(options),
      on_change_(std::move(on_change)),
      credentials_(std::move(credentials)),
      rng_(std::random_device()()) {
  absl::MutexLock lock(&mu_);
  for (const std::string& address : options_.workers) AddWorkerLocked(address, /*is_static=*/true);
  for (InProcessWorker& worker : in_process) {
    const int w = AddWorkerLocked(worker.name, /*is_static=*/true, std::move(worker.channel));
    if (w >= 0) workers_[w]->direct = std::move(worker.direct);
  }
}

WorkerRegistry::~WorkerRegistry() { Stop(); }

void WorkerRegistry::SetMetrics(RouterMetrics* metrics) {
  absl::MutexLock lock(&mu_);
  metrics_ = metrics;
  if (metrics_ == nullptr) return;
  for (auto& w : workers_) {
    if (!w->retired && w->placements == nullptr) {
      w->placements = metrics_->AddWorkerPlacementCounter(w->address);
    }
  }
}

void WorkerRegistry::ConnectLocked(Worker& worker) {
  worker.channel = worker.in_process_channel != nullptr
                       ? worker.in_process_channel
                       : MakeWorkerChannel(worker.address, options_, credentials_);
  worker.stub = pkv::v1::Worker::NewStub(worker.channel);
  worker.health = grpc::health::v1::Health::NewStub(worker.channel);
  ++worker.generation;
  if (metrics_ != nullptr && worker.placements == nullptr) {
    worker.placements = metrics_->AddWorkerPlacementCounter(worker.address);
  }
}

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
  const absl::Duration health_interval = options_.health_interval;
  const absl::Duration load_interval = options_.load_interval;
  // An ejected worker is probed at its breaker's reopen time, not only on the health interval.
  const absl::Duration tick = std::min(health_interval, absl::Milliseconds(50));
  while (true) {
    int slots = 0;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time wake = std::min({next_health, next_load, absl::Now() + tick});
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithDeadline(absl::Condition(&stop), wake);
      if (stopping_) return;
      RetireIdleLocked(absl::Now());
      slots = static_cast<int>(workers_.size());
    }
    const absl::Time now = absl::Now();
    const bool health_round = now >= next_health;
    // Every tick: breakers whose reopen time came (ProbeHealth skips the others off-round).
    for (int w = 0; w < slots; ++w) ProbeHealth(w, health_round);
    if (health_round) next_health = now + health_interval;
    if (now >= next_load) {
      for (int w = 0; w < slots; ++w) ProbeLoad(w);
      next_load = now + load_interval;
    }
  }
}

int WorkerRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return NumActiveLocked();
}

int WorkerRegistry::num_slots() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

std::string WorkerRegistry::address(int w) const {
  absl::MutexLock lock(&mu_);
  return workers_[w]->address;
}

WorkerRegistry::StubPtr WorkerRegistry::stub(int w) const {
  absl::MutexLock lock(&mu_);
  return workers_[w]->stub;
}

bool WorkerRegistry::IsHealthy(int w) const {
  absl::MutexLock lock(&mu_);
  return HealthyLocked(*workers_[w]);
}

int WorkerRegistry::num_healthy() const {
  absl::MutexLock lock(&mu_);
  return NumHealthyLocked();
}

int WorkerRegistry::num_suspect() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& w : workers_) n += !w->removed && w->suspect;
  return n;
}

int WorkerRegistry::NumHealthyLocked() const {
  int n = 0;
  for (const auto& w : workers_) n += HealthyLocked(*w);
  return n;
}

int WorkerRegistry::NumActiveLocked() const {
  int n = 0;
  for (const auto& w : workers_) n += !w->removed;
  return n;
}

std::string WorkerRegistry::WorkerId(int w) const {
  absl::MutexLock lock(&mu_);
  const Worker& worker = *workers_[w];
  return worker.worker_id.empty() ? worker.address : worker.worker_id;
}

std::vector<WorkerLoad> WorkerRegistry::Loads() const {
  std::vector<WorkerLoad> loads;
  absl::MutexLock lock(&mu_);
  loads.reserve(workers_.size());
  for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
    const Worker& worker = *workers_[w];
    if (worker.removed) continue;
    loads.push_back(WorkerLoad{w, HealthyLocked(worker),
                               worker.reported_load + static_cast<uint64_t>(worker.inflight)});
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

WorkerRegistry::CallTarget WorkerRegistry::BeginCall(int w) {
  absl::MutexLock lock(&mu_);
  Worker& worker = *workers_[w];
  if (worker.removed || worker.stub == nullptr) return {};
  ++worker.inflight;
  if (worker.placements != nullptr) worker.placements->Increment();
  return {worker.stub, worker.direct};
}

void WorkerRegistry::EndCall(int w) {
  absl::MutexLock lock(&mu_);
  --workers_[w]->inflight;
}

int WorkerRegistry::inflight(int w) const {
  absl::MutexLock lock(&mu_);
  return workers_[w]->inflight;
}

bool WorkerRegistry::TripLocked(Worker& worker) {
  const bool ejected = worker.breaker.Trip(absl::Now(), rng_());
  MarkNotServingLocked(worker);
  if (ejected && metrics_ != nullptr) metrics_->RecordEjection();
  return ejected;
}

void WorkerRegistry::ReportFailed(int w, absl::string_view why) {
  bool changed = false, ejected = false;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (worker.removed || !worker.breaker.closed()) return;  // already out of rotation
    changed = HealthyLocked(worker);
    ejected = TripLocked(worker);
    address = worker.address;
    worker.logged_down = true;
  }
  if (ejected) {
    PKV_LOG(WARNING) << "worker " << address << " ejected: " << why;
  }
  if (changed) NotifyChange();
}

void WorkerRegistry::ReportLost(int w, absl::string_view why) {
  bool changed = false;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    // Already out of rotation, or already being checked.
    if (worker.removed || !worker.breaker.closed() || worker.suspect) return;
    changed = HealthyLocked(worker);
    worker.suspect = true;
    generation = worker.generation;
  }
  if (changed) NotifyChange();
  VerifyLost(w, generation, std::string(why));
}

void WorkerRegistry::NotifyChange() {
  if (!on_change_) return;
  absl::MutexLock serial(&listener_mu_);
  int healthy = 0, active = 0;
  {
    absl::MutexLock lock(&mu_);
    healthy = NumHealthyLocked();
    active = NumActiveLocked();
  }
  on_change_(healthy, active - healthy);
}

}  // namespace pkv::router
