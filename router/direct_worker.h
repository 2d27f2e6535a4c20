// A worker in the router's own process that serves Worker.Generate without gRPC (colocated/: the
// router and one worker in one process). The router's stream for a request placed on such a worker
// hands the request to the worker's engine through this interface and receives the worker's
// messages by callback, so the first token skips a transport, a serialization each way and the
// executor hand-offs of a gRPC call (issue 18: the router's cost).
//
// The router defines the interface and colocated/ implements it over the worker's engine, so
// router/ does not depend on worker/. Only Generate travels this way: health, load, model info,
// drain and the stall check's GetProgress still go over the worker's in-process gRPC channel, so
// the worker stays an ordinary registry member (router/worker_registry.h).
//
// The messages and statuses are those of pkv.v1.Worker/Generate (worker.proto): Accepted, Chunk*,
// Complete, then the end; the statuses mean what they mean over gRPC (UNAVAILABLE: draining or
// shutting down, the router re-places; RESOURCE_EXHAUSTED: full; DEADLINE_EXCEEDED; INTERNAL ...).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pkv/v1/worker.pb.h"

namespace pkv::router {

// The router's end of one direct Generate. Thread-safe. Shared: the worker may keep it past the
// stream's end (a late message after the router gave up); such calls are no-ops.
class DirectStreamSink {
 public:
  virtual ~DirectStreamSink() = default;
  // Each message in order (Accepted, Chunk..., Complete), from the worker's engine thread; no two
  // at once. Must not block: the engine's step waits for it.
  virtual void OnMessage(pkv::v1::WorkerGenerateResponse message) = 0;
  // Exactly once, after the last message: OK after a Complete, else why the stream ended.
  virtual void OnEnd(const absl::Status& status) = 0;
};

// One request queued on a direct worker: the router's handle to cancel it.
class DirectGeneration {
 public:
  virtual ~DirectGeneration() = default;  // does not cancel
  // Removes the request within one engine step and frees its KV pages (the abort is counted as
  // the deadline's when within the worker's slack of it, else as a client cancel, as over gRPC).
  // The sink may still receive its end, which the router then ignores. Non-blocking, thread-safe,
  // idempotent; a no-op once the request finished.
  virtual void Cancel() = 0;
};

class DirectWorker {
 public:
  virtual ~DirectWorker() = default;
  // Queues `request` on the worker's engine with the client's `deadline` (InfiniteFuture: none);
  // the output goes to `sink`. An error (draining, full, bad request, deadline passed, model not
  // loaded yet) means nothing was queued and `sink` is never called. Non-blocking; thread-safe.
  virtual absl::StatusOr<std::unique_ptr<DirectGeneration>> Generate(
      const pkv::v1::WorkerGenerateRequest& request, absl::Time deadline,
      std::shared_ptr<DirectStreamSink> sink) = 0;
};

}  // namespace pkv::router
