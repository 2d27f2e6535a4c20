// WorkerRegistry's worker set: slots for static and DNS-discovered workers, removal of workers DNS
// no longer lists, and retirement once their last stream ended (see worker_registry.h).
#include <set>

#include "common/log.h"
#include "router/dns_discovery.h"
#include "router/worker_registry.h"

namespace pkv::router {

int WorkerRegistry::AddWorkerLocked(const std::string& address, bool is_static,
                                    std::shared_ptr<grpc::Channel> in_process_channel) {
  int slot = -1;
  for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
    if (workers_[w]->address == address) slot = w;
  }
  if (slot >= 0) {
    Worker& worker = *workers_[slot];
    worker.is_static = worker.is_static || is_static;
    if (!worker.removed) return slot;  // already there (a duplicate)
    worker.removed = false;            // came back before or after retirement
    if (worker.retired) {
      worker.retired = false;
      ConnectLocked(worker);
    }
    return slot;
  }
  const absl::Time now = absl::Now();
  for (int w = 0; w < static_cast<int>(workers_.size()) && slot < 0; ++w) {
    if (workers_[w]->retired && now - workers_[w]->retired_at >= kSlotReuseGrace) slot = w;
  }
  if (slot < 0) {
    if (static_cast<int>(workers_.size()) >= options_.max_workers) {
      PKV_LOG(ERROR) << "cannot add worker " << address << ": all " << options_.max_workers
                     << " worker slots are in use (raise --max_workers)";
      return -1;
    }
    slot = static_cast<int>(workers_.size());
    workers_.push_back(nullptr);
  }
  const uint64_t generation = workers_[slot] == nullptr ? 0 : workers_[slot]->generation;
  workers_[slot] = std::make_unique<Worker>();
  Worker& worker = *workers_[slot];
  worker.address = address;
  worker.is_static = is_static;
  worker.in_process_channel = std::move(in_process_channel);
  worker.generation = generation;  // ConnectLocked bumps it past the previous occupant's
  worker.breaker = CircuitBreaker(
      CircuitBreakerOptions{options_.eject_base, options_.eject_max, options_.eject_reset});
  ConnectLocked(worker);
  return slot;
}

void WorkerRegistry::RetireIdleLocked(absl::Time now) {
  for (auto& w : workers_) {
    Worker& worker = *w;
    if (!worker.removed || worker.retired || worker.inflight > 0) continue;
    worker.retired = true;
    worker.retired_at = now;
    worker.channel.reset();
    worker.stub.reset();
    worker.health.reset();
    MarkNotServingLocked(worker);
    if (metrics_ != nullptr) metrics_->RemoveWorkerPlacementCounter(worker.placements);
    worker.placements = nullptr;
    PKV_LOG(INFO) << "worker " << worker.address << " retired (removed from DNS, streams done)";
  }
}

void WorkerRegistry::SetDiscovered(const std::vector<std::string>& addresses) {
  std::vector<std::string> added, removed;
  {
    absl::MutexLock lock(&mu_);
    std::set<std::string> discovered, statics;
    for (const auto& w : workers_) {
      if (w->is_static) {
        statics.insert(w->address);
      } else if (!w->removed) {
        discovered.insert(w->address);
      }
    }
    const DiscoveryChange change = ReconcileDiscovered(discovered, statics, addresses);
    for (const std::string& address : change.add) {
      if (AddWorkerLocked(address, /*is_static=*/false) >= 0) added.push_back(address);
    }
    for (const std::string& address : change.remove) {
      for (auto& w : workers_) {
        if (w->address != address || w->removed) continue;
        w->removed = true;  // never placed again; RetireIdleLocked frees it once idle
        removed.push_back(address);
      }
    }
  }
  for (const std::string& a : added) PKV_LOG(INFO) << "worker " << a << " discovered";
  for (const std::string& a : removed) {
    PKV_LOG(INFO) << "worker " << a << " no longer in DNS: no new placements";
  }
  if (!added.empty() || !removed.empty()) NotifyChange();
}

}  // namespace pkv::router
