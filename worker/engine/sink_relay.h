// Delivers the engine's output calls (RequestSink) on a thread of their own, so the scheduler
// thread never runs a transport's write between two steps.
//
// Why: a gRPC stream's StartWrite, called from a thread that is not one of gRPC's, runs the HTTP/2
// write (serialization, framing, the socket send) inline on the caller. StreamOutbox starts one
// for every token of a stream whose previous write has finished, which at B=1 is every token:
// 40-80 us a token on the scheduler thread, during which the GPU waits for the next step
// (measured: served 8B 4.64 ms a token against 4.59 ms of step; 1B 1.146 against 1.105; on the
// 2-core build box 47-82 us per OnChunk of a CPU-backend step; bench/NOTES.md "Eleventh
// session"). The colocated router's sink writes the client's stream the same way.
//
// Order: calls run in the order posted (one relay thread), so a request's OnAccepted, OnChunk...
// and its single terminal call keep their order, and the engine's bookkeeping posted after a
// terminal call (Engine::MarkTerminal) runs once the transport has the message. Backpressure: at
// most `capacity` calls wait; Post blocks past that, so a relay that cannot keep up slows the
// engine instead of buffering without bound. Thread-safety: Post from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "worker/engine/request_sink.h"

namespace pkv {

class SinkRelay {
 public:
  explicit SinkRelay(size_t capacity = kDefaultCapacity);
  ~SinkRelay();  // runs everything posted, then joins the thread
  SinkRelay(const SinkRelay&) = delete;
  SinkRelay& operator=(const SinkRelay&) = delete;

  // Queues `call` to run on the relay thread after every call posted before it. Blocks while
  // `capacity` calls are waiting. After Shutdown the call runs on the caller's thread.
  void Post(absl::AnyInvocable<void() &&> call);
  // Runs what is queued and stops the thread; later posts run inline. Idempotent.
  void Shutdown();

  // Generous for a step's chunks at the largest batch (256 rows) several steps deep.
  static constexpr size_t kDefaultCapacity = 4096;

 private:
  void Loop();

  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// A request's sink as the engine sees it: output calls go through the relay, the health queries
// (read on the scheduler thread, cheap) straight to the transport's sink.
class RelayedSink final : public RequestSink {
 public:
  RelayedSink(std::shared_ptr<RequestSink> sink, SinkRelay* relay)
      : sink_(std::move(sink)), relay_(relay) {}

  void OnAccepted(const std::vector<int32_t>& prompt_token_ids) override;
  void OnChunk(pkv::v1::Chunk chunk) override;
  void OnComplete(pkv::v1::Complete complete) override;
  void OnError(const absl::Status& status) override;
  bool Healthy() const override { return sink_->Healthy(); }
  AbortReason BrokenReason() const override { return sink_->BrokenReason(); }

 private:
  const std::shared_ptr<RequestSink> sink_;
  SinkRelay* const relay_;
};

}  // namespace pkv
