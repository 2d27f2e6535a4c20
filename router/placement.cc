#include "router/placement.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace pkv::router {

const char* PlacementReasonName(PlacementReason reason) {
  switch (reason) {
    case PlacementReason::kAffinity:
      return "affinity";
    case PlacementReason::kLeastLoaded:
      return "least_loaded";
    case PlacementReason::kFailover:
      return "failover";
    case PlacementReason::kPrefix:
      return "prefix";
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

uint64_t PrefixLoadBound(uint64_t min_load, const PrefixRouting& routing) {
  return static_cast<uint64_t>(routing.load_factor * static_cast<double>(min_load)) +
         routing.load_slack;
}

namespace {

bool Excluded(absl::Span<const int> exclude, int w) {
  return std::find(exclude.begin(), exclude.end(), w) != exclude.end();
}

// The worker with the longest likely-cached prefix among the eligible ones (the same fallback to
// every placeable worker as ChooseLeastLoadedOfTwo) within the load bound; ties go to the sticky
// worker (when it was excluded, the retry still prefers a worker over another), then the less
// loaded. nullptr when no such worker has a prefix block.
const WorkerLoad* BestPrefixWorker(absl::Span<const WorkerLoad> workers,
                                   absl::Span<const int> exclude, std::optional<int> sticky,
                                   const PrefixRouting& routing) {
  std::vector<const WorkerLoad*> eligible;
  for (const WorkerLoad& w : workers)
    if (w.placeable && !Excluded(exclude, w.worker)) eligible.push_back(&w);
  if (eligible.empty()) {
    for (const WorkerLoad& w : workers)
      if (w.placeable) eligible.push_back(&w);
  }
  if (eligible.empty()) return nullptr;
  uint64_t min_load = eligible[0]->load;
  for (const WorkerLoad* w : eligible) min_load = std::min(min_load, w->load);
  const uint64_t bound = PrefixLoadBound(min_load, routing);
  const WorkerLoad* best = nullptr;
  auto rank = [&](const WorkerLoad* w) {  // larger is better
    return std::make_tuple(w->prefix_blocks, sticky == w->worker, ~w->load);
  };
  for (const WorkerLoad* w : eligible) {
    if (w->load > bound || w->prefix_blocks <= 0) continue;
    if (best == nullptr || rank(w) > rank(best)) best = w;
  }
  return best;
}

}  // namespace

std::optional<Placement> ChoosePlacement(absl::string_view session_id,
                                         absl::Span<const WorkerLoad> workers,
                                         absl::Span<const int> exclude, bool retry,
                                         SessionAffinityMap& sessions, std::mt19937_64& rng,
                                         const PrefixRouting& routing) {
  std::optional<int> sticky;
  if (!session_id.empty()) sticky = sessions.Lookup(session_id);
  const WorkerLoad* sticky_load = nullptr;
  if (sticky.has_value() && !Excluded(exclude, *sticky)) {
    for (const WorkerLoad& w : workers)
      if (w.worker == *sticky && w.placeable) sticky_load = &w;
  }
  if (sticky_load != nullptr) {
    return Placement{*sticky, PlacementReason::kAffinity, sticky_load->prefix_blocks};
  }
  const WorkerLoad* best =
      routing.enabled ? BestPrefixWorker(workers, exclude, sticky, routing) : nullptr;
  int chosen = -1;
  int32_t blocks = 0;
  PlacementReason reason = PlacementReason::kLeastLoaded;
  if (best != nullptr) {
    chosen = best->worker;
    blocks = best->prefix_blocks;
    reason = PlacementReason::kPrefix;
  } else {
    chosen = ChooseLeastLoadedOfTwo(workers, exclude, rng);
    if (chosen < 0) return std::nullopt;
    for (const WorkerLoad& w : workers)
      if (w.worker == chosen) blocks = w.prefix_blocks;
  }
  if (!session_id.empty()) sessions.Set(session_id, chosen);
  // A retry, or a session that lost its sticky worker, is a failover whatever chose the worker.
  if (retry || (sticky.has_value() && sticky_load == nullptr)) reason = PlacementReason::kFailover;
  return Placement{chosen, reason, blocks};
}

std::optional<Placement> Placer::Place(absl::string_view session_id,
                                       absl::Span<const uint64_t> prompt_blocks,
                                       absl::Span<const WorkerLoad> workers,
                                       absl::Span<const int> exclude, bool retry) {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerLoad> scored(workers.begin(), workers.end());
  if (routing_.enabled && !prompt_blocks.empty()) {
    for (WorkerLoad& w : scored) w.prefix_blocks = index_.MatchedBlocks(w.worker, prompt_blocks);
  }
  std::optional<Placement> placement =
      ChoosePlacement(session_id, scored, exclude, retry, sessions_, rng_, routing_);
  if (placement.has_value() && routing_.enabled) index_.Record(placement->worker, prompt_blocks);
  return placement;
}

}  // namespace pkv::router
