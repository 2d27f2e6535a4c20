// One client Generate stream at the router: validate, admit, place, relay, fail over.
//
//   Start ─▶ draining? no healthy worker? invalid? ─▶ Finish(UNAVAILABLE / INVALID_ARGUMENT)
//         ─▶ admission: slot ─▶ attempt │ queued ─▶ (slot ─▶ attempt | timeout ─▶
//         RESOURCE_EXHAUSTED)
//            │ queue full ─▶ RESOURCE_EXHAUSTED + grpc-retry-pushback-ms
//   attempt: place (affinity / two choices), open Worker.Generate with the client's deadline
//            (over gRPC, or a direct call into a worker in this process: router/worker_call.h),
//            relay Accepted (kept: prompt ids, worker id), Chunks, Complete (+ worker_id,
//            migrations, request_id).
//   worker fails before the first chunk with UNAVAILABLE / RESOURCE_EXHAUSTED / lost (refused,
//            stalled, vanished): backoff + jitter, re-place elsewhere, at most
//            options.max_attempts placements in all (a lost worker that had accepted the
//            request counts as migrations_total{phase="before_first_token"}).
//   worker lost after chunks were sent: migrate (replay prompt ids + emitted tokens through
//            WorkerGenerateRequest.resume_token_ids; the new worker continues the same sampler
//            and detokenizer state, so the client sees no duplicate and no gap) while
//            migrations < options.max_migrations (migrations_total{phase="mid_stream"}); a
//            replay attempt that fails before its first chunk is re-placed like a first attempt
//            (max_attempts, backoff); else ABORTED "... after N tokens" + trailer
//            tokens-emitted: N.
//   a lost worker is reported to the registry: proven failures (a wedged engine, output that
//            never arrives) eject it at once; other losses make it suspect until a health check
//            decides (router/worker_registry.h).
//   client cancels / deadline / Generation.Abort: the worker call is cancelled at once (the
//            router's own cancel is never the worker's failure); Abort ends the stream CANCELLED
//            after the tokens already queued; a deadline that passed before admission or before a
//            (re-)placement ends the stream with DEADLINE_EXCEEDED without calling a worker.
//   client stops reading (a write outstanding for client_write_timeout): the call is
//            cancelled (ClientWriteWatchdog), which cancels the worker call too.
//   "Lost" = UNAVAILABLE, an OK end without Complete, or a stall verdict. Silence for
//   stall_timeout by the router's clock only starts a progress check (Worker.GetProgress), since
//   the router itself may have been starved or paused; the worker's answer decides
//   (JudgeSilenceLocked). RESOURCE_EXHAUSTED after tokens (the worker dropped a stream the router
//   did not read) migrates the stream without blaming the worker.
//
// Threads: gRPC server reactions, worker-call reactions (a direct call's on the worker engine's
// thread), admission callbacks and timer callbacks all touch the state under mu_; gRPC operations
// (StartWrite, Finish, StartCall, TryCancel) are issued after unlocking, because gRPC may run a
// reaction inline and reactions take mu_.
// Lifetime: self-owned; deleted when the last of {server reaction OnDone, each worker call's
// OnDone, each pending timer, an admission wait} lets go of its reference.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "pkv/v1/generation.pb.h"
#include "router/client_write_watchdog.h"
#include "router/request_table.h"
#include "router/response_queue.h"
#include "router/router_context.h"
#include "router/worker_call.h"

namespace pkv::router {

// The reactor writes serialized responses (grpc::ByteBuffer): GenerationService registers Generate
// as a raw method so that it can answer an unparsable request with INVALID_ARGUMENT itself
// (gRPC 1.51 would answer UNIMPLEMENTED with no message).
// Inconclusive progress checks in a row (output said to be produced, none arriving) after which
// the worker is convicted: about kMaxInconclusiveProbes stall timeouts of nothing at all.
inline constexpr int kMaxInconclusiveProbes = 3;
// With no placeable worker but some being verified (WorkerRegistry::ReportLost), a placement waits
// kSuspectWait at a time, at most kMaxSuspectWaits times (beyond the verification's deadline).
inline constexpr absl::Duration kSuspectWait = absl::Milliseconds(50);
inline constexpr int kMaxSuspectWaits = 60;

class GenerateStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                             public WorkerCallObserver,
                             public AbortableStream {
 public:
  GenerateStream(const RouterContext& rc, grpc::CallbackServerContext* ctx,
                 const pkv::v1::GenerateRequest& request);
  // Begins the state machine; call once, right after construction, before returning the reactor.
  void Start();

  void OnWorkerMessage(WorkerCall* call, pkv::v1::WorkerGenerateResponse message) override;
  void OnWorkerDone(WorkerCall* call, const grpc::Status& status) override;

  // AbortableStream (Generation.Abort).
  void Ref() override { refs_.fetch_add(1); }
  void Unref() override {
    if (refs_.fetch_sub(1) == 1) delete this;
  }
  bool AbortByRequest(const std::string& request_id) override;

 private:
  ~GenerateStream() override;

  // Server reactions.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Steps (each takes mu_ itself unless named *Locked).
  // Draining, model known, validation, request id and seed; non-OK = finish with it.
  absl::Status PrepareLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAdmission(absl::Status status);
  // The client cancelled, its deadline passed, or a write failed: stop everything at once.
  void ClientGone();
  // Ends the stream on the client's behalf (gone, or Abort) and cancels the worker call, which
  // is then not a worker failure. `client_gone`: nothing more can be delivered (queued messages
  // are dropped); else the queued tokens are delivered before `status`. True when this ended it.
  bool EndForClient(grpc::Status status, bool client_gone);
  void StartAttempt();
  // The stall timer: silence by the router's clock starts a progress check (Worker.GetProgress);
  // its answer re-arms the timer or convicts the worker (JudgeSilenceLocked).
  void OnStallTimer();
  struct ProgressProbe {
    grpc::ClientContext ctx;
    pkv::v1::GetProgressRequest request;
    pkv::v1::Progress response;
    WorkerCall* call = nullptr;  // the attempt it asks about
    absl::Time sent_at;
  };
  // A progress check's outcome: the verdict (also what pkv_router_stall_checks_total counts), and
  // for a conviction whether the worker's own answer proved it (else: it did not answer) and why,
  // else when to check again.
  struct StallJudgement {
    RouterMetrics::StallVerdict verdict = RouterMetrics::StallVerdict::kProgress;
    bool proven = false;
    std::string reason;
    absl::Time next_check;
  };
  void OnProgressAnswer(const ProgressProbe* probe, const grpc::Status& status);
  StallJudgement JudgeSilenceLocked(const ProgressProbe& probe, const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t SilenceMs(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::ToInt64Milliseconds(now - last_worker_message_);
  }
  void OnBackoffTimer();
  void HandleWorkerFailureLocked(WorkerCall* call, const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before any chunk: retry elsewhere (lost / RESOURCE_EXHAUSTED) or finish with the status.
  // `accepted`: the failed worker had sent Accepted (the request was queued or running there).
  void FailBeforeFirstTokenLocked(const grpc::Status& status, bool lost, bool accepted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A replay attempt failed before its first chunk: place it again or end with ABORTED.
  void RetryMigrationLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbortAfterTokensLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Schedules StartAttempt after the n-th attempt's jittered backoff; false (nothing scheduled)
  // when the client's deadline would pass first.
  bool ScheduleBackoffLocked(int attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After chunks: migrate when allowed, else ABORTED with the count of tokens sent.
  void WorkerLostAfterTokensLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsLostWorker(const WorkerCall* call, const grpc::Status& status) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleRetryLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  pkv::v1::WorkerGenerateRequest BuildWorkerRequestLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmStallTimerLocked(absl::Time when) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the request in pkv_router_requests_total / _request_duration_seconds, once: when its
  // final status is handed to gRPC (so a client that has its status sees it counted), or at
  // OnDone for a stream that ended without one (client gone).
  void RecordRequestOnceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddPushbackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Performs the queue's next action after the caller unlocked.
  void Flush();
  void Serialize(const pkv::v1::GenerateResponse& message);  // into wire_
  // On a write's completion: records the relay stage if it carried the first chunk.
  void RecordRelayIfFirstChunk();
  void Perform(ResponseQueue::Action action);

  const RouterContext rc_;
  grpc::CallbackServerContext* const ctx_;
  const absl::Time start_time_;
  const absl::Time deadline_;  // the client's, clamped (common/deadline.h); InfiniteFuture: none
  std::atomic<int> refs_{1};   // the server reaction's own reference, dropped in OnDone
  // Cancels the call when the client leaves a write unread too long (client_write_timeout).
  ClientWriteWatchdog watchdog_;

  absl::Mutex mu_;
  pkv::v1::GenerateRequest request_ ABSL_GUARDED_BY(mu_);  // validated, id and seed assigned
  uint64_t table_handle_ ABSL_GUARDED_BY(mu_) = 0;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  bool holds_slot_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t admission_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // non-zero while queued
  uint64_t backoff_timer_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stall_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  ResponseQueue out_ ABSL_GUARDED_BY(mu_);
  // The message being written, serialized; touched only by the thread that received the write
  // action from out_ (one write in flight), stable until OnWriteDone.
  grpc::ByteBuffer wire_;
  // The status to finish with once the last message's write is done (Perform); set and read by
  // the thread that owns the write in flight.
  std::optional<grpc::Status> finish_after_write_;
  // The write in flight carries the first chunk: its completion closes the relay stage. Owned
  // like wire_.
  bool write_has_first_chunk_ = false;
  std::vector<std::pair<std::string, std::string>> trailers_ ABSL_GUARDED_BY(mu_);
  absl::StatusCode final_code_ ABSL_GUARDED_BY(mu_) = absl::StatusCode::kUnknown;
  bool request_recorded_ ABSL_GUARDED_BY(mu_) = false;

  // Attempts. Every WorkerCall lives until this stream is destroyed (pointers stay valid).
  std::vector<std::unique_ptr<WorkerCall>> calls_ ABSL_GUARDED_BY(mu_);
  WorkerCall* call_ ABSL_GUARDED_BY(mu_) = nullptr;  // the live attempt, if any
  std::vector<int> tried_workers_ ABSL_GUARDED_BY(mu_);
  // The prompt's prefix block keys for prefix-aware placement (computed at the first placement).
  std::vector<uint64_t> prompt_blocks_ ABSL_GUARDED_BY(mu_);
  bool prompt_blocks_ready_ ABSL_GUARDED_BY(mu_) = false;
  int placements_ ABSL_GUARDED_BY(mu_) = 0;            // before the first chunk
  int migration_placements_ ABSL_GUARDED_BY(mu_) = 0;  // attempts of the current migration
  int attempt_chunks_ ABSL_GUARDED_BY(mu_) = 0;        // chunks from the live attempt
  uint64_t attempt_tokens_ ABSL_GUARDED_BY(mu_) = 0;   // tokens from the live attempt
  // Stall checks: the attempt a progress check is out for; answers that were neither progress nor
  // a legitimate wait in a row (a worker that says it produced tokens that never arrive); and
  // why the last conviction happened.
  WorkerCall* probing_ ABSL_GUARDED_BY(mu_) = nullptr;
  int inconclusive_probes_ ABSL_GUARDED_BY(mu_) = 0;
  std::string stall_reason_ ABSL_GUARDED_BY(mu_);
  int migrations_ ABSL_GUARDED_BY(mu_) = 0;
  int suspect_waits_ ABSL_GUARDED_BY(mu_) = 0;
  bool migrating_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status last_error_ ABSL_GUARDED_BY(mu_);
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  absl::Time last_worker_message_ ABSL_GUARDED_BY(mu_);
  // First-token stage timing (RouterMetrics::FirstTokenStage): when the current attempt's
  // worker call started, and when the first chunk arrived.
  absl::Time attempt_started_ ABSL_GUARDED_BY(mu_);
  absl::Time first_chunk_at_ ABSL_GUARDED_BY(mu_);
  bool first_chunk_handed_to_write_ ABSL_GUARDED_BY(mu_) = false;

  // What the client has been sent, for migration replay and the ABORTED message.
  std::vector<uint32_t> prompt_token_ids_ ABSL_GUARDED_BY(mu_);  // from Accepted
  std::vector<uint32_t> emitted_token_ids_ ABSL_GUARDED_BY(mu_);
  bool first_chunk_seen_ ABSL_GUARDED_BY(mu_) = false;
  bool completed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pkv::router
