// What the worker tells the router about one Generate stream when the router asks (GetProgress):
// how many tokens the engine handed to it and whether its final status went out. The router asks
// only about a stream that has been silent for its stall timeout, to tell its own starvation (the
// tokens are produced but it has not read them) from the worker's failure.
//
// StreamProgress is shared by the stream's outbox (which counts) and the table (which answers);
// the table keeps a finished stream for kRetention, so a router that was paused while a stream
// ended still learns that it ended. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv {

struct StreamProgress {
  std::atomic<uint64_t> tokens_produced{0};
  // Unix nanoseconds when the final status was handed to gRPC; 0 while live.
  std::atomic<int64_t> finished_at_ns{0};

  // The stream's end went out (or its reader went away): stamps finished_at_ns once.
  void MarkFinished() {
    int64_t live = 0;
    finished_at_ns.compare_exchange_strong(live, absl::ToUnixNanos(absl::Now()));
  }
};

class StreamProgressTable {
 public:
  static constexpr absl::Duration kRetention = absl::Seconds(60);

  // Registers a stream the engine accepted under `request_id` (replacing an older one with the
  // same id).
  void Add(const std::string& request_id, std::shared_ptr<StreamProgress> progress);

  struct Answer {
    uint64_t tokens_produced = 0;
    bool finished = false;
  };
  // nullopt when no stream with that id is live or ended within kRetention.
  std::optional<Answer> Lookup(const std::string& request_id) const;

  size_t size() const;

 private:
  // Drops streams that finished more than kRetention ago; amortised over Adds.
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<StreamProgress>> by_id_ ABSL_GUARDED_BY(mu_);
  size_t adds_since_prune_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pkv
