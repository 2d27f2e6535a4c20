// Placement: which worker gets a request.
//
// Rule (DESIGN.md): a request with a session_id goes to the worker that served that session last
// while that worker is placeable (healthy, not draining, model known) and has not already failed
// this request — so a conversation's KV and prefix caches stay warm. Otherwise pick two distinct
// eligible workers at random and take the less loaded ("power of two choices": nearly the balance
// of least-loaded with none of its herding onto one worker when load reports are stale), and
// remember it for the session.
//   load = worker-reported running + waiting + the router's own in-flight streams to that worker
// (the last term reacts at once, between load polls).
// Example: loads {w0: 9, w1: 2, w2: 5}; the draw picks w0 and w2 -> w2. With one eligible
// worker it is chosen without a draw. Workers that failed this request are avoided while any
// other is eligible, then allowed again (one worker that was briefly full may take the retry).
//
// Reasons (metric label pkv_router_placements_total{reason}): "affinity" = the sticky worker;
// "failover" = a retry after a failed attempt, or a session whose sticky worker is gone;
// "least_loaded" = a fresh two-choices placement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace pkv::router {

struct WorkerLoad {
  int worker = 0;          // registry index
  bool placeable = false;  // healthy, not draining, ModelInfo known
  uint64_t load = 0;       // running + waiting (worker-reported) + router in-flight
};

enum class PlacementReason { kAffinity = 0, kLeastLoaded = 1, kFailover = 2 };
inline constexpr int kNumPlacementReasons = 3;
const char* PlacementReasonName(PlacementReason reason);

struct Placement {
  int worker = -1;
  PlacementReason reason = PlacementReason::kLeastLoaded;
};

// Session -> worker map with least-recently-used eviction beyond `capacity` entries.
// Not thread-safe (Placer guards it).
class SessionAffinityMap {
 public:
  explicit SessionAffinityMap(size_t capacity) : capacity_(capacity) {}
  // The session's worker, marking it most recently used; nullopt when unknown.
  std::optional<int> Lookup(absl::string_view session);
  // Inserts or updates, evicting the least recently used entry when over capacity.
  void Set(absl::string_view session, int worker);
  size_t size() const { return index_.size(); }
  bool Contains(absl::string_view session) const { return index_.contains(session); }

 private:
  using Entry = std::pair<std::string, int>;
  size_t capacity_;
  std::list<Entry> lru_;  // front = most recently used
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
};

// Two-choices pick among placeable workers not in `exclude` (or, when none is left, among all
// placeable ones). Returns the registry index, or -1 when no worker is placeable.
int ChooseLeastLoadedOfTwo(absl::Span<const WorkerLoad> workers, absl::Span<const int> exclude,
                           std::mt19937_64& rng);

// The whole rule above. `retry` marks a re-placement after a failed attempt. Updates `sessions`.
std::optional<Placement> ChoosePlacement(absl::string_view session_id,
                                         absl::Span<const WorkerLoad> workers,
                                         absl::Span<const int> exclude, bool retry,
                                         SessionAffinityMap& sessions, std::mt19937_64& rng);

// Thread-safe owner of the session map and the random source.
class Placer {
 public:
  Placer(size_t max_sessions, uint64_t seed) : sessions_(max_sessions), rng_(seed) {}
  std::optional<Placement> Place(absl::string_view session_id, absl::Span<const WorkerLoad> workers,
                                 absl::Span<const int> exclude, bool retry) {
    absl::MutexLock lock(&mu_);
    return ChoosePlacement(session_id, workers, exclude, retry, sessions_, rng_);
  }
  size_t num_sessions() const {
    absl::MutexLock lock(&mu_);
    return sessions_.size();
  }

 private:
  mutable absl::Mutex mu_;
  SessionAffinityMap sessions_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pkv::router
