// GenerateStream: start, admission, placement and the client-facing reactions. The worker-facing
// half (messages, failures, failover, stall detection) is in generate_stream_worker.cc.
#include "router/generate_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/request_validation.h"
#include "common/deadline.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace pkv::router {
namespace {

// What a request may hold in the admission queue: its prompt's token ids, or the bytes of a text
// or chat prompt (an upper bound on its tokens for byte-level tokenizers).
int64_t QueuedPromptSize(const pkv::v1::GenerateRequest& request) {
  switch (request.prompt_case()) {
    case pkv::v1::GenerateRequest::kTokenIds:
      return request.token_ids().ids_size();
    case pkv::v1::GenerateRequest::kChat: {
      int64_t bytes = 0;
      for (const pkv::v1::ChatMessage& m : request.chat().messages()) bytes += m.content().size();
      return bytes;
    }
    default:
      return static_cast<int64_t>(request.text().size());
  }
}

}  // namespace

GenerateStream::GenerateStream(const RouterContext& rc, grpc::CallbackServerContext* ctx,
                               const pkv::v1::GenerateRequest& request)
    : rc_(rc),
      ctx_(ctx),
      start_time_(absl::Now()),
      deadline_(ServerCallDeadline(*ctx)),
      watchdog_(rc.timers, rc.options->client_write_timeout, ctx,
                [metrics = rc.metrics, timeout = rc.options->client_write_timeout] {
                  metrics->RecordSlowClientCancel();
                  PKV_LOG(WARNING) << "a client left a response unread for "
                                   << absl::FormatDuration(timeout) << "; cancelling its stream";
                }) {
  absl::MutexLock lock(&mu_);
  request_ = request;
  rc_.streams->Increment();
}

GenerateStream::~GenerateStream() { rc_.streams->Decrement(); }

absl::Status GenerateStream::PrepareLocked() {
  if (rc_.draining->load()) {
    rc_.metrics->RecordRejection(RouterMetrics::Rejection::kDraining);
    return absl::UnavailableError("router is draining (shutting down); retry on another router");
  }
  if (DeadlinePassed(deadline_)) {
    // Expired on arrival (RELIABILITY C4): answered before it costs a slot or a worker anything.
    return absl::DeadlineExceededError("deadline expired before the request was admitted");
  }
  const std::optional<pkv::v1::ModelInfo> model = rc_.registry->AnyModelInfo();
  if (!model.has_value()) {
    return absl::UnavailableError(absl::StrCat(
        "no healthy worker (0 of ", rc_.registry->size(),
        " are healthy); check them with `pkv health --addr <worker>` or start one with "
        "`make serve`"));
  }
  absl::Status valid = api::ValidateGenerateRequest(request_, *model, rc_.options->limits);
  if (!valid.ok()) return valid;
  if (request_.request_id().empty()) request_.set_request_id(rc_.ids->NextRequestId());
  // A request is reproducible (and resumable on another worker) only with a seed, so the router
  // picks one when the client did not (common.proto: "the router picks one").
  if (!request_.sampling().has_seed()) {
    request_.mutable_sampling()->set_seed(rc_.ids->NextRandom());
  }
  return absl::OkStatus();
}

void GenerateStream::Start() {
  bool start_attempt = false;
  {
    absl::MutexLock lock(&mu_);
    absl::Status prepared = PrepareLocked();
    if (!prepared.ok()) {
      FailLocked(ToGrpcStatus(prepared));
    } else {
      table_handle_ = rc_.requests->Add(request_.request_id(), this);
      registered_ = true;
      const AdmissionController::Result admission =
          rc_.admission->Acquire([this](absl::Status status) { OnAdmission(std::move(status)); },
                                 QueuedPromptSize(request_));
      switch (admission.outcome) {
        case AdmissionController::Outcome::kAdmitted:
          holds_slot_ = true;
          start_attempt = true;
          break;
        case AdmissionController::Outcome::kQueued:
          admission_ticket_ = admission.ticket;
          Ref();  // dropped by OnAdmission, or by ClientGone when it removes the wait
          break;
        case AdmissionController::Outcome::kRejected:
          rc_.metrics->RecordRejection(RouterMetrics::Rejection::kQueueFull);
          FailLocked(grpc::Status(
              grpc::StatusCode::RESOURCE_EXHAUSTED,
              absl::StrCat("router is at capacity: ", rc_.options->max_inflight,
                           " streams in flight and the queue is full (at most ",
                           rc_.options->max_queue, " requests, ", rc_.options->max_queue_tokens,
                           " prompt tokens); retry "
                           "after the grpc-retry-pushback-ms delay")));
          AddPushbackLocked();
          break;
      }
    }
  }
  if (start_attempt) StartAttempt();
  Flush();
}

void GenerateStream::OnAdmission(absl::Status status) {
  bool start_attempt = false;
  {
    absl::MutexLock lock(&mu_);
    admission_ticket_ = 0;
    if (status.ok()) {
      holds_slot_ = true;  // released in OnDone whatever happens next
      start_attempt = !client_gone_ && !out_.has_final();
    } else if (!out_.has_final()) {
      rc_.metrics->RecordRejection(RouterMetrics::Rejection::kQueueTimeout);
      FailLocked(ToGrpcStatus(status));
      AddPushbackLocked();
    }
  }
  if (start_attempt) StartAttempt();
  Flush();
  Unref();
}

void GenerateStream::StartAttempt() {
  WorkerCall* call = nullptr;
  WorkerRegistry::CallTarget target;
  {
    absl::MutexLock lock(&mu_);
    if (client_gone_ || out_.has_final() || call_ != nullptr) return;
    std::optional<Placement> placement;
    const PrefixRouting& routing = rc_.placer->routing();
    if (!prompt_blocks_ready_ && routing.enabled) {
      prompt_blocks_ = PromptBlockHashes(request_, routing.block_tokens, routing.block_bytes);
    }
    prompt_blocks_ready_ = true;
    // A worker removed (DNS) between the load snapshot and BeginCall is skipped: place again.
    for (int tries = 0; tries < 3 && target.stub == nullptr; ++tries) {
      placement = rc_.placer->Place(request_.session_id(), prompt_blocks_, rc_.registry->Loads(),
                                    tried_workers_, /*retry=*/!tried_workers_.empty());
      if (!placement.has_value()) break;
      target = rc_.registry->BeginCall(placement->worker);  // counts it in the worker's load
      if (target.stub == nullptr) tried_workers_.push_back(placement->worker);
    }
    if (DeadlinePassed(deadline_)) {
      if (target.stub != nullptr) rc_.registry->EndCall(placement->worker);
      target = {};
      FailLocked(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              "deadline expired before a worker could take the request"));
    } else if (target.stub == nullptr && rc_.registry->num_suspect() > 0 &&
               suspect_waits_ < kMaxSuspectWaits) {
      // Workers are being verified after streams reported them lost (the router may have torn
      // their transports down itself after a pause): wait for the verdict rather than fail.
      ++suspect_waits_;
      ScheduleRetryLocked(kSuspectWait);
    } else if (target.stub == nullptr && first_chunk_seen_) {
      // A migration found no worker: the client has tokens, so ABORTED + tokens-emitted (a
      // blind retry would repeat them), never UNAVAILABLE.
      AbortAfterTokensLocked();
    } else if (target.stub == nullptr) {
      FailLocked(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          last_error_.ok()
              ? absl::StrCat("no healthy worker (0 of ", rc_.registry->size(), " are healthy)")
              : absl::StrCat("no healthy worker left after ", tried_workers_.size(),
                             " attempts; last error: ", last_error_.error_message())));
    } else {
      const int w = placement->worker;
      if (!first_chunk_seen_) ++placements_;
      attempt_chunks_ = 0;
      attempt_tokens_ = 0;
      inconclusive_probes_ = 0;
      tried_workers_.push_back(w);
      rc_.metrics->RecordPlacement(placement->reason);
      if (!prompt_blocks_.empty()) {
        rc_.metrics->RecordPrefixEstimate(static_cast<int64_t>(prompt_blocks_.size()),
                                          placement->prefix_blocks);
      }
      calls_.push_back(MakeWorkerCall(this, w, std::move(target.stub), std::move(target.direct),
                                      BuildWorkerRequestLocked(), deadline_));
      call = call_ = calls_.back().get();
      Ref();  // dropped in OnWorkerDone
      last_worker_message_ = absl::Now();
      attempt_started_ = last_worker_message_;
      if (placements_ == 1 && migrations_ == 0) {
        rc_.metrics->RecordFirstTokenStage(RouterMetrics::FirstTokenStage::kAdmit,
                                           absl::ToDoubleSeconds(attempt_started_ - start_time_));
      }
      ArmStallTimerLocked(last_worker_message_ + rc_.options->stall_timeout);
    }
  }
  if (call != nullptr) call->Start();
  Flush();
}

pkv::v1::WorkerGenerateRequest GenerateStream::BuildWorkerRequestLocked() const {
  pkv::v1::WorkerGenerateRequest worker_request;
  *worker_request.mutable_request() = request_;
  worker_request.set_migrations(migrations_);
  worker_request.set_max_prompt_tokens(rc_.options->limits.max_prompt_tokens);
  if (migrations_ > 0) {
    // Replay: the prompt as the token ids the first worker reported, plus everything the client
    // already has; the new worker streams only what comes after.
    auto* ids = worker_request.mutable_request()->mutable_token_ids();
    ids->clear_ids();
    ids->mutable_ids()->Add(prompt_token_ids_.begin(), prompt_token_ids_.end());
    worker_request.mutable_resume_token_ids()->Add(emitted_token_ids_.begin(),
                                                   emitted_token_ids_.end());
  }
  return worker_request;
}

void GenerateStream::FailLocked(grpc::Status status) {
  if (out_.has_final()) return;
  final_code_ = static_cast<absl::StatusCode>(status.error_code());
  out_.SetFinal(std::move(status));
}

void GenerateStream::RecordRequestOnceLocked() {
  if (std::exchange(request_recorded_, true)) return;
  rc_.metrics->RecordRequest(final_code_, absl::ToDoubleSeconds(absl::Now() - start_time_));
}

void GenerateStream::AddPushbackLocked() {
  trailers_.emplace_back("grpc-retry-pushback-ms",
                         absl::StrCat(absl::ToInt64Milliseconds(rc_.options->retry_pushback)));
}

void GenerateStream::Flush() {
  ResponseQueue::Action action;
  std::vector<std::pair<std::string, std::string>> trailers;
  {
    absl::MutexLock lock(&mu_);
    action = out_.Next();
    if (!first_chunk_handed_to_write_ && action.message != nullptr && action.message->has_chunk()) {
      first_chunk_handed_to_write_ = true;
      write_has_first_chunk_ = true;
    }
    if (action.kind == ResponseQueue::Action::Kind::kWriteAndFinish ||
        action.kind == ResponseQueue::Action::Kind::kFinish) {
      trailers = trailers_;
      RecordRequestOnceLocked();
    }
  }
  using Kind = ResponseQueue::Action::Kind;
  if (action.kind != Kind::kNone) watchdog_.WriteStarted();
  if (action.kind == Kind::kWriteAndFinish || action.kind == Kind::kFinish) {
    for (const auto& [key, value] : trailers) ctx_->AddTrailingMetadata(key, value);
  }
  switch (action.kind) {
    case Kind::kNone:
      break;
    case Kind::kWrite:
      Serialize(*action.message);
      StartWrite(&wire_);
      break;
    case Kind::kWriteAndFinish:
      Serialize(*action.message);
      // Written, then finished in OnWriteDone, not StartWriteAndFinish: gRPC 1.51's in-process
      // transport (the HTTP API's channel) can drop a last message sent in one batch with the
      // status, and the client then sees OK without the Complete (about 3% of streams).
      finish_after_write_ = action.status;
      StartWrite(&wire_);
      break;
    case Kind::kFinish:
      Finish(action.status);
      break;
  }
}

void GenerateStream::Serialize(const pkv::v1::GenerateResponse& message) {
  bool own_buffer = false;
  wire_.Clear();  // the previous message's write is done (one write in flight)
  // Serializing a message we built cannot fail short of memory exhaustion.
  (void)grpc::SerializationTraits<pkv::v1::GenerateResponse>::Serialize(message, &wire_,
                                                                        &own_buffer);
}

void GenerateStream::RecordRelayIfFirstChunk() {
  if (!write_has_first_chunk_) return;
  write_has_first_chunk_ = false;
  absl::Time first_chunk_at;
  {
    absl::MutexLock lock(&mu_);
    first_chunk_at = first_chunk_at_;
  }
  rc_.metrics->RecordFirstTokenStage(RouterMetrics::FirstTokenStage::kRelay,
                                     absl::ToDoubleSeconds(absl::Now() - first_chunk_at));
}

void GenerateStream::OnWriteDone(bool ok) {
  RecordRelayIfFirstChunk();
  if (finish_after_write_.has_value()) {
    watchdog_.WriteDone();
    grpc::Status status = std::move(*finish_after_write_);
    finish_after_write_.reset();
    Finish(std::move(status));
    return;
  }
  watchdog_.WriteDone();
  {
    absl::MutexLock lock(&mu_);
    out_.WriteDone();
  }
  if (!ok) {
    ClientGone();  // the client went away mid-write; OnCancel follows
    return;
  }
  Flush();
}

void GenerateStream::OnCancel() {
  // A reset by the client (not its deadline) counts against its connection's reset budget.
  if (!DeadlinePassed(deadline_)) rc_.connections->RecordReset(ctx_->peer());
  ClientGone();
}

void GenerateStream::ClientGone() {
  EndForClient(DeadlinePassed(deadline_)
                   ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded")
                   : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"),
               /*client_gone=*/true);
}

bool GenerateStream::AbortByRequest(const std::string& request_id) {
  return EndForClient(
      grpc::Status(grpc::StatusCode::CANCELLED,
                   absl::StrCat("aborted by Generation.Abort (request_id ", request_id, ")")),
      /*client_gone=*/false);
}

bool GenerateStream::EndForClient(grpc::Status status, bool client_gone) {
  WorkerCall* to_cancel = nullptr;
  uint64_t ticket = 0, backoff = 0, stall = 0;
  bool ended = false;
  {
    absl::MutexLock lock(&mu_);
    if (client_gone) {
      client_gone_ = true;
      // Nothing more can reach the client: whatever was queued (a Complete too) is dropped.
      if (!out_.finish_started()) {
        out_.DropPending();
        FailLocked(std::move(status));
        ended = true;
      }
    } else if (!completed_ && !out_.has_final()) {
      // Abort: the tokens already queued still reach the client, then CANCELLED.
      FailLocked(std::move(status));
      ended = true;
    }
    if (call_ != nullptr && (client_gone || ended)) {
      // Cancelled by the router on the client's behalf: not the worker's failure.
      call_->MarkAbandoned();
      to_cancel = call_;
    }
    if (client_gone || ended) {
      ticket = std::exchange(admission_ticket_, 0);
      backoff = std::exchange(backoff_timer_, 0);
      stall = std::exchange(stall_timer_, 0);
    }
  }
  if (to_cancel != nullptr) to_cancel->Cancel();  // reaches the worker at once
  if (ticket != 0 && rc_.admission->CancelWait(ticket)) Unref();
  if (backoff != 0 && rc_.timers->Cancel(backoff)) Unref();
  if (stall != 0 && rc_.timers->Cancel(stall)) Unref();
  Flush();
  return ended;
}

void GenerateStream::OnDone() {
  watchdog_.Stop();  // first: the context is about to go away
  WorkerCall* to_cancel = nullptr;
  uint64_t stall = 0, backoff = 0;
  bool release_slot = false;
  {
    absl::MutexLock lock(&mu_);
    RecordRequestOnceLocked();
    if (call_ != nullptr) {  // finished while a worker call still runs (e.g. client gone)
      call_->MarkAbandoned();
      to_cancel = call_;
    }
    stall = std::exchange(stall_timer_, 0);
    backoff = std::exchange(backoff_timer_, 0);
    release_slot = std::exchange(holds_slot_, false);
    if (registered_) rc_.requests->Remove(table_handle_, request_.request_id());
    registered_ = false;
  }
  if (to_cancel != nullptr) to_cancel->Cancel();
  if (stall != 0 && rc_.timers->Cancel(stall)) Unref();
  if (backoff != 0 && rc_.timers->Cancel(backoff)) Unref();
  if (release_slot) rc_.admission->Release();
  Unref();  // the server reaction's reference
}

}  // namespace pkv::router
