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
// Prefixes (issue 18): each worker's `prefix_blocks` is how many leading blocks of this prompt
// the router placed there before (PrefixIndex, prefix_index.h), i.e. the prefix its KV cache
// likely still holds. A request without a usable sticky worker goes, among the eligible workers
// whose load is within PrefixLoadBound(min load), to the one with the most prefix blocks (ties:
// the less loaded) ("prefix"); with no prefix block anywhere, by two choices as above. A usable
// sticky worker still wins: the client named the conversation, and its previous turns' prefix is
// there (the index agrees in the common case); the session input is the stronger of the two. The
// load bound keeps a hot shared prefix (one system prompt for all traffic) from piling every
// request on one worker: once its load passes the bound the others take the traffic by two
// choices and warm their own caches.
//
// Reasons (metric label pkv_router_placements_total{reason}): "affinity" = the sticky worker;
// "failover" = a retry after a failed attempt, or a session whose sticky worker is gone;
// "least_loaded" = a fresh two-choices placement; "prefix" = the worker with the longest cached
// prefix.
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
#include "router/prefix_index.h"

namespace pkv::router {

struct WorkerLoad {
  int worker = 0;             // registry index
  bool placeable = false;     // healthy, not draining, ModelInfo known
  uint64_t load = 0;          // running + waiting (worker-reported) + router in-flight
  int32_t prefix_blocks = 0;  // leading blocks of this prompt the worker likely caches
};

enum class PlacementReason { kAffinity = 0, kLeastLoaded = 1, kFailover = 2, kPrefix = 3 };
inline constexpr int kNumPlacementReasons = 4;
const char* PlacementReasonName(PlacementReason reason);

struct Placement {
  int worker = -1;
  PlacementReason reason = PlacementReason::kLeastLoaded;
  int32_t prefix_blocks = 0;  // the chosen worker's prefix_blocks (the router's estimated hit)
};

// Prefix-aware placement knobs.
struct PrefixRouting {
  bool enabled = true;
  int32_t block_tokens = 16;  // token-id prompts: one block per worker KV page of 16 tokens
  int32_t block_bytes = 64;   // text prompts: ~16 tokens of English text
  size_t max_blocks_per_worker = 1 << 16;  // index entries remembered per worker (LRU)
  double load_factor = 2.0;                // PrefixLoadBound
  uint64_t load_slack = 4;                 // PrefixLoadBound
};

// The most load a worker may carry and still be chosen for its cached prefix:
//   bound = load_factor * min_load + load_slack
// where min_load is the least load among the eligible workers. A cache hit saves a prefill but
// a queue costs whole requests, so a worker may run about twice the least loaded one's work (plus
// a few requests' slack, so idle clusters follow the cache freely). Example, defaults: loads
// {w0: 0, w1: 3} -> bound 4, both may take a prefix; {w0: 10, w1: 30} -> bound 24, the hot w1 is
// passed over and the request goes by two choices.
uint64_t PrefixLoadBound(uint64_t min_load, const PrefixRouting& routing);

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
                                         SessionAffinityMap& sessions, std::mt19937_64& rng,
                                         const PrefixRouting& routing = {});

// Thread-safe owner of the session map, the prefix index and the random source.
class Placer {
 public:
  Placer(size_t max_sessions, uint64_t seed, PrefixRouting routing = {})
      : routing_(routing),
        sessions_(max_sessions),
        index_(routing.max_blocks_per_worker),
        rng_(seed) {}
  std::optional<Placement> Place(absl::string_view session_id, absl::Span<const WorkerLoad> workers,
                                 absl::Span<const int> exclude, bool retry) {
    return Place(session_id, {}, workers, exclude, retry);
  }
  // With the prompt's block keys (PromptBlockHashes): fills each worker's prefix_blocks from the
  // index, places, and records the keys on the chosen worker.
  std::optional<Placement> Place(absl::string_view session_id,
                                 absl::Span<const uint64_t> prompt_blocks,
                                 absl::Span<const WorkerLoad> workers,
                                 absl::Span<const int> exclude, bool retry);
  size_t num_sessions() const {
    absl::MutexLock lock(&mu_);
    return sessions_.size();
  }
  const PrefixRouting& routing() const { return routing_; }

 private:
  const PrefixRouting routing_;
  mutable absl::Mutex mu_;
  SessionAffinityMap sessions_ ABSL_GUARDED_BY(mu_);
  PrefixIndex index_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pkv::router
