// The router's table of live Generate streams: request_id -> the worker serving it (for Abort),
// and the count of live streams (for drain). Also the source of router-assigned request ids and
// sampling seeds.
//
// Thread-safe. Request ids are not required to be unique across clients; when two live streams
// share an id, Abort reaches the one placed most recently.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv::router {

class RequestTable {
 public:
  // Registers a live stream; returns a handle for SetWorker/Remove.
  uint64_t Add(const std::string& request_id);
  // Records the stream's current worker (registry index), replacing any earlier one.
  void SetWorker(uint64_t handle, const std::string& request_id, int worker);
  void Remove(uint64_t handle, const std::string& request_id);

  // Worker serving `request_id`, nullopt when unknown or not yet placed.
  std::optional<int> WorkerOf(const std::string& request_id) const;
  int live_streams() const;
  // Blocks the calling (non-gRPC) thread until no stream is live or `deadline`; true when empty.
  bool WaitUntilEmpty(absl::Time deadline) const;

 private:
  struct Entry {
    uint64_t handle;
    int worker;  // -1 until placed
  };
  mutable absl::Mutex mu_;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  int live_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Entry> by_id_ ABSL_GUARDED_BY(mu_);
};

// Counts live objects (GenerateStreams, which outlive their RPC while a worker call winds down)
// so the server can wait for the last one before destroying what they use. Thread-safe.
class LiveCounter {
 public:
  void Increment();
  void Decrement();
  int value() const;
  // Blocks the calling (non-gRPC) thread until the count is 0 or `deadline`; true when 0.
  bool WaitForZero(absl::Time deadline) const;

 private:
  mutable absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

// Router-assigned request ids ("r-" + 16 hex digits) and seeds: splitmix64 over an atomic counter
// keyed at start-up, so ids are unique within a process and unpredictable across restarts.
class IdSource {
 public:
  explicit IdSource(uint64_t key) : key_(key) {}
  uint64_t NextRandom();
  std::string NextRequestId();

 private:
  const uint64_t key_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace pkv::router
