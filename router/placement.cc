#include "router/placement.h"

#include <algorithm>

namespace pkv::router {

const char* PlacementReasonName(PlacementReason reason) {
  switch (reason) {
    case PlacementReason::kAffinity:
      return "affinity";
    case PlacementReason::kLeastLoaded:
      return "least_loaded";
    case PlacementReason::kFailover:
      return "failover";
  }
  return "unknown";
}

std::optional<int> SessionAffinityMap::Lookup(absl::string_view session) {
  auto it = index_.find(session);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void SessionAffinityMap::Set(absl::string_view session, int worker) {
  auto it = index_.find(session);
  if (it != index_.end()) {
    it->second->second = worker;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(std::string(session), worker);
  index_.emplace(lru_.front().first, lru_.begin());
  while (index_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

int ChooseLeastLoadedOfTwo(absl::Span<const WorkerLoad> workers, absl::Span<const int> exclude,
                           std::mt19937_64& rng) {
  auto excluded = [&](int w) {
    return std::find(exclude.begin(), exclude.end(), w) != exclude.end();
  };
  std::vector<const WorkerLoad*> eligible;
  for (const WorkerLoad& w : workers) {
    if (w.placeable && !excluded(w.worker)) eligible.push_back(&w);
  }
  if (eligible.empty()) {
    for (const WorkerLoad& w : workers) {
      if (w.placeable) eligible.push_back(&w);
    }
  }
  if (eligible.empty()) return -1;
  if (eligible.size() == 1) return eligible[0]->worker;
  // Two distinct indices: draw a, then b from the remaining n - 1 slots.
  const size_t n = eligible.size();
  const size_t a = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  size_t b = std::uniform_int_distribution<size_t>(0, n - 2)(rng);
  if (b >= a) ++b;
  return eligible[b]->load < eligible[a]->load ? eligible[b]->worker : eligible[a]->worker;
}

std::optional<Placement> ChoosePlacement(absl::string_view session_id,
                                         absl::Span<const WorkerLoad> workers,
                                         absl::Span<const int> exclude, bool retry,
                                         SessionAffinityMap& sessions, std::mt19937_64& rng) {
  std::optional<int> sticky;
  if (!session_id.empty()) sticky = sessions.Lookup(session_id);
  if (sticky.has_value()) {
    const bool excluded = std::find(exclude.begin(), exclude.end(), *sticky) != exclude.end();
    for (const WorkerLoad& w : workers) {
      if (w.worker == *sticky && w.placeable && !excluded) {
        return Placement{*sticky, PlacementReason::kAffinity};
      }
    }
  }
  const int chosen = ChooseLeastLoadedOfTwo(workers, exclude, rng);
  if (chosen < 0) return std::nullopt;
  if (!session_id.empty()) sessions.Set(session_id, chosen);
  const bool failover = retry || sticky.has_value();
  return Placement{chosen, failover ? PlacementReason::kFailover : PlacementReason::kLeastLoaded};
}

}  // namespace pkv::router
