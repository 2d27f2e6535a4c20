// The server side of one Worker.Generate stream: a gRPC callback reactor plus a shared outbox the
// engine writes into (RequestSink). gRPC owns the reactor until OnDone; the engine holds the outbox
// through a shared_ptr, so either side may go first. One write in flight at a time; messages queue
// in the outbox. A client that stops reading is detected when the queue exceeds
// kMaxQueuedMessages: the sink turns unhealthy and the engine aborts the request (RELIABILITY S3).
// A RESOURCE_EXHAUSTED end carries grpc-retry-pushback-ms (kRetryPushbackMs) like the router's.
//
// Thread-safety: all members guarded by the outbox mutex; reactor callbacks run on gRPC threads and
// sink calls on the engine's scheduler thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "worker/engine/request_sink.h"
#include "worker/service/stream_progress.h"

namespace pkv {

class GenerateStream;

// The retry hint sent with every RESOURCE_EXHAUSTED from the worker (gRPC retry pushback).
inline constexpr int kRetryPushbackMs = 250;

// Worker.Generate's messages, built alike for the gRPC stream and the co-located router's direct
// path (colocated/direct_worker.cc).
pkv::v1::WorkerGenerateResponse AcceptedResponse(const std::vector<int32_t>& prompt_token_ids,
                                                 const std::string& worker_id);
pkv::v1::WorkerGenerateResponse ChunkResponse(pkv::v1::Chunk chunk);
pkv::v1::WorkerGenerateResponse CompleteResponse(pkv::v1::Complete complete);

class StreamOutbox : public RequestSink {
 public:
  static constexpr size_t kMaxQueuedMessages = 4096;

  // `deadline`: the call's (InfiniteFuture when none); a transport cancel within
  // kDeadlineSlack of it is reported as the deadline, not as a client cancel.
  // `progress` (may be null) counts the tokens produced and marks the end, for GetProgress.
  StreamOutbox(std::string worker_id, absl::Time deadline,
               std::shared_ptr<StreamProgress> progress = nullptr)
      : worker_id_(std::move(worker_id)), deadline_(deadline), progress_(std::move(progress)) {}

  // The router's cancel at the client's deadline can overtake the worker's own deadline timer by
  // the request's transit time; a cancel this close to the deadline is the deadline
  // (RELIABILITY C3: pkv_seq_aborts_total{reason} must tell the two apart exactly).
  static constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(100);
  // The reason an abort of a stream with `deadline` is counted under when its reader broke off
  // for `reason` now.
  static AbortReason CountedReason(AbortReason reason, absl::Time deadline);

  void OnAccepted(const std::vector<int32_t>& prompt_token_ids) override;
  void OnChunk(pkv::v1::Chunk chunk) override;
  void OnComplete(pkv::v1::Complete complete) override;
  void OnError(const absl::Status& status) override;
  bool Healthy() const override;
  AbortReason BrokenReason() const override;

 private:
  friend class GenerateStream;
  // Queues a message (terminal ones carry the final status) and starts a write if none is in
  // flight.
  void Push(pkv::v1::WorkerGenerateResponse msg, bool terminal, grpc::Status final_status);
  void MaybeStartWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BreakLocked(AbortReason reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reactor callbacks.
  void WriteDone(bool ok);
  void Cancelled();
  void Detach();
  // The stream's end was handed to gRPC (or the reactor went away): GetProgress says finished.
  void MarkFinished() {
    if (progress_ != nullptr) progress_->MarkFinished();
  }

  const std::string worker_id_;
  const absl::Time deadline_;
  const std::shared_ptr<StreamProgress> progress_;
  mutable absl::Mutex mu_;
  GenerateStream* reactor_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<pkv::v1::WorkerGenerateResponse> queue_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool terminal_queued_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called on the reactor
  bool broken_ ABSL_GUARDED_BY(mu_) = false;    // cancelled, write failed or client too slow
  AbortReason broken_reason_ ABSL_GUARDED_BY(mu_) = AbortReason::kClientCancel;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

class GenerateStream : public grpc::ServerWriteReactor<pkv::v1::WorkerGenerateResponse> {
 public:
  // `on_cancel` runs once if the client cancels or disconnects before the stream finished.
  // `context` (gRPC's, valid until OnDone) receives the retry-pushback trailer.
  GenerateStream(grpc::CallbackServerContext* context, std::shared_ptr<StreamOutbox> outbox,
                 std::function<void()> on_cancel);

  std::shared_ptr<StreamOutbox> outbox() const { return outbox_; }

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  friend class StreamOutbox;
  // Finish(), adding grpc-retry-pushback-ms to a RESOURCE_EXHAUSTED status.
  void FinishWith(const grpc::Status& status);

  grpc::CallbackServerContext* const context_;
  std::shared_ptr<StreamOutbox> outbox_;
  std::function<void()> on_cancel_;
};

}  // namespace pkv
