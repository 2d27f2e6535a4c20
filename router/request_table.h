// The router's table of live Generate streams: request_id -> the stream (for Abort), and the count
// of live streams (for drain). Also the source of router-assigned request ids and
// sampling seeds.
//
// Thread-safe. Request ids are not required to be unique across clients; when two live streams
// share an id, Abort reaches the one registered most recently.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv::router {

// What Generation.Abort needs of a live stream. Ref/Unref keep it alive across the call.
class AbortableStream {
 public:
  virtual void Ref() = 0;
  virtual void Unref() = 0;
  // Ends the client's stream with CANCELLED and cancels its worker call (which frees the
  // request's pages at the worker within a step); never counts against the worker. False when
  // the stream was already ending.
  virtual bool AbortByRequest(const std::string& request_id) = 0;

 protected:
  ~AbortableStream() = default;
};

class RequestTable {
 public:
  // Registers a live stream (which stays alive until its Remove); returns a handle for Remove.
  uint64_t Add(const std::string& request_id, AbortableStream* stream);
  void Remove(uint64_t handle, const std::string& request_id);

  // Aborts the live stream registered under `request_id`; false when there is none or it was
  // already ending.
  bool Abort(const std::string& request_id);
  int live_streams() const;
  // Blocks the calling (non-gRPC) thread until no stream is live or `deadline`; true when empty.
  bool WaitUntilEmpty(absl::Time deadline) const;

 private:
  struct Entry {
    uint64_t handle;
    AbortableStream* stream;
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
