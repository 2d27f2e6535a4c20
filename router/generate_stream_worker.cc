// GenerateStream, worker-facing half: relaying worker messages, classifying a worker's failure,
// failover before the first chunk, migration or ABORTED after it, and stall detection.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "router/backoff.h"
#include "router/generate_stream.h"

namespace pkv::router {

void GenerateStream::OnWorkerMessage(WorkerCall* call, pkv::v1::WorkerGenerateResponse message) {
  {
    absl::MutexLock lock(&mu_);
    if (call != call_ || out_.has_final()) return;  // a superseded attempt, or already ending
    last_worker_message_ = absl::Now();
    switch (message.kind_case()) {
      case pkv::v1::WorkerGenerateResponse::kAccepted: {
        const pkv::v1::Accepted& accepted = message.accepted();
        // The first worker's tokenization is the one replayed on migration.
        if (prompt_token_ids_.empty()) {
          prompt_token_ids_.assign(accepted.prompt_token_ids().begin(),
                                   accepted.prompt_token_ids().end());
        }
        worker_id_ = accepted.worker_id();
        break;
      }
      case pkv::v1::WorkerGenerateResponse::kChunk: {
        if (!first_chunk_seen_) {
          first_chunk_seen_ = true;
          rc_.metrics->RecordTimeToFirstToken(
              absl::ToDoubleSeconds(last_worker_message_ - start_time_));
        }
        ++attempt_chunks_;
        const auto& ids = message.chunk().token_ids();
        emitted_token_ids_.insert(emitted_token_ids_.end(), ids.begin(), ids.end());
        out_.PushChunk(std::move(*message.mutable_chunk()));
        break;
      }
      case pkv::v1::WorkerGenerateResponse::kComplete: {
        pkv::v1::Complete complete = std::move(*message.mutable_complete());
        if (complete.worker_id().empty()) {
          complete.set_worker_id(worker_id_.empty() ? rc_.registry->WorkerId(call->worker())
                                                    : worker_id_);
        }
        complete.set_migrations(migrations_);
        complete.set_request_id(request_.request_id());
        completed_ = true;
        final_code_ = absl::StatusCode::kOk;
        out_.PushComplete(std::move(complete));
        break;
      }
      default:
        break;  // an unknown kind from a newer worker: ignore
    }
  }
  Flush();
}

void GenerateStream::OnWorkerDone(WorkerCall* call, const grpc::Status& status) {
  int lost_worker = -1;
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    if (call == call_) {
      call_ = nullptr;
      if (!completed_ && !out_.has_final()) {
        HandleWorkerFailureLocked(call, status);
        // Dead, stalled, refusing or draining: out of rotation now, not at the next health
        // check (the breaker's half-open probe readmits it).
        if (IsLostWorker(call, status)) {
          lost_worker = call->worker();
          why = last_error_.error_message();
        }
      }
    }
  }
  if (lost_worker >= 0) rc_.registry->ReportLost(lost_worker, why);
  rc_.registry->EndCall(call->worker());  // last: the worker's slot stays live while counted
  Flush();
  Unref();  // the reference StartAttempt took for this call
}

bool GenerateStream::IsLostWorker(const WorkerCall* call, const grpc::Status& status) const {
  if (call->stalled()) return true;
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return !completed_;  // ended without a Complete
    case grpc::StatusCode::UNAVAILABLE:
      return true;
    case grpc::StatusCode::CANCELLED:
      return !call->abandoned();  // not our own cancel
    default:
      return false;
  }
}

void GenerateStream::HandleWorkerFailureLocked(WorkerCall* call, const grpc::Status& status) {
  const bool lost = IsLostWorker(call, status);
  const std::string worker = rc_.registry->WorkerId(call->worker());
  const std::string what =
      call->stalled() ? absl::StrCat("silent for ", rc_.options->stall_timeout_ms, " ms")
      : status.ok()
          ? std::string("stream ended without a Complete")
          : absl::StrCat(StatusCodeName(static_cast<absl::StatusCode>(status.error_code())), ": ",
                         status.error_message());
  last_error_ = grpc::Status(status.ok() ? grpc::StatusCode::UNAVAILABLE : status.error_code(),
                             absl::StrCat("worker ", worker, " ", what));
  const bool exhausted = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  if (!first_chunk_seen_) {
    FailBeforeFirstTokenLocked(status, lost, call->got_message());
  } else if (migrations_ > 0 && attempt_chunks_ == 0 && (lost || exhausted)) {
    RetryMigrationLocked();  // the replay never got going on that worker: place it again
  } else if (lost) {
    WorkerLostAfterTokensLocked();
  } else {
    // INTERNAL (a backend failure: not migrated, README "Reliability"), INVALID_ARGUMENT, ...
    // after tokens: pass through.
    FailLocked(status);
  }
}

void GenerateStream::FailBeforeFirstTokenLocked(const grpc::Status& status, bool lost,
                                                bool accepted) {
  // Nothing reached the client: another worker can take the request transparently.
  const bool exhausted = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  if (!lost && !exhausted) {
    FailLocked(status);  // INVALID_ARGUMENT, INTERNAL, DEADLINE_EXCEEDED ... pass through
    return;
  }
  if (placements_ < rc_.options->max_attempts && ScheduleBackoffLocked(placements_)) {
    PKV_LOG(INFO) << "request " << request_.request_id() << ": " << last_error_.error_message()
                  << " before the first token; re-placing (attempt " << placements_ + 1 << " of "
                  << rc_.options->max_attempts << ")";
    rc_.metrics->RecordFailover();
    if (lost && accepted) {
      rc_.metrics->RecordMigration(RouterMetrics::MigrationPhase::kBeforeFirstToken);
    }
    return;
  }
  FailLocked(
      grpc::Status(exhausted ? grpc::StatusCode::RESOURCE_EXHAUSTED : grpc::StatusCode::UNAVAILABLE,
                   absl::StrCat("no worker could take the request after ", placements_,
                                " placement(s); last: ", last_error_.error_message())));
  if (exhausted) AddPushbackLocked();
}

void GenerateStream::WorkerLostAfterTokensLocked() {
  if (emitted_token_ids_.size() >= request_.sampling().max_tokens()) {
    // Lost between its last token and its Complete: nothing is left to generate, so the router
    // completes the stream itself (finish reason LENGTH, as the worker would have).
    pkv::v1::Complete complete;
    complete.set_finish_reason(pkv::v1::FINISH_REASON_LENGTH);
    complete.set_prompt_tokens(static_cast<uint32_t>(prompt_token_ids_.size()));
    complete.set_completion_tokens(static_cast<uint32_t>(emitted_token_ids_.size()));
    complete.set_worker_id(worker_id_);
    complete.set_migrations(migrations_);
    complete.set_request_id(request_.request_id());
    completed_ = true;
    final_code_ = absl::StatusCode::kOk;
    out_.PushComplete(std::move(complete));
    return;
  }
  if (migrations_ < rc_.options->max_migrations && !prompt_token_ids_.empty()) {
    ++migrations_;
    migration_placements_ = 1;
    rc_.metrics->RecordMigration(RouterMetrics::MigrationPhase::kMidStream);
    PKV_LOG(INFO) << "request " << request_.request_id() << ": " << last_error_.error_message()
                  << " after " << emitted_token_ids_.size() << " tokens; migrating";
    ScheduleRetryLocked(absl::ZeroDuration());  // StartAttempt builds the replay request
    return;
  }
  AbortAfterTokensLocked();
}

void GenerateStream::RetryMigrationLocked() {
  if (migration_placements_ < rc_.options->max_attempts &&
      ScheduleBackoffLocked(migration_placements_)) {
    ++migration_placements_;
    PKV_LOG(INFO) << "request " << request_.request_id() << ": " << last_error_.error_message()
                  << " before the replay's first token; re-placing the migration (attempt "
                  << migration_placements_ << " of " << rc_.options->max_attempts << ")";
    return;
  }
  AbortAfterTokensLocked();
}

bool GenerateStream::ScheduleBackoffLocked(int attempt) {
  const absl::Duration delay =
      RetryBackoff(attempt, absl::Milliseconds(rc_.options->retry_backoff_ms),
                   absl::Milliseconds(rc_.options->retry_backoff_max_ms), rc_.ids->NextRandom());
  const auto deadline = ctx_->deadline();
  if (deadline != std::chrono::system_clock::time_point::max() &&
      absl::FromChrono(deadline) <= absl::Now() + delay) {
    return false;  // no retry can finish in time (RELIABILITY: no retry after the deadline)
  }
  ScheduleRetryLocked(delay);
  return true;
}

void GenerateStream::AbortAfterTokensLocked() {
  const uint64_t sent = out_.tokens_queued();
  trailers_.emplace_back("tokens-emitted", absl::StrCat(sent));
  FailLocked(grpc::Status(grpc::StatusCode::ABORTED,
                          absl::StrCat(last_error_.error_message(), " after ", sent,
                                       " tokens were sent; the stream cannot continue (retry the "
                                       "request; the tokens already received are valid)")));
}

void GenerateStream::ScheduleRetryLocked(absl::Duration delay) {
  Ref();  // dropped by OnBackoffTimer, or by whoever cancels the timer
  backoff_timer_ = rc_.timers->ScheduleAfter(delay, [this] { OnBackoffTimer(); });
}

void GenerateStream::OnBackoffTimer() {
  {
    absl::MutexLock lock(&mu_);
    backoff_timer_ = 0;
  }
  StartAttempt();
  Unref();
}

void GenerateStream::ArmStallTimerLocked(absl::Time when) {
  if (stall_timer_ != 0) return;  // one pending check per stream; it re-arms itself
  Ref();
  stall_timer_ = rc_.timers->Schedule(when, [this] { OnStallTimer(); });
}

void GenerateStream::OnStallTimer() {
  WorkerCall* stalled = nullptr;
  {
    absl::MutexLock lock(&mu_);
    stall_timer_ = 0;
    if (call_ != nullptr && !completed_ && !out_.has_final()) {
      const absl::Duration stall = absl::Milliseconds(rc_.options->stall_timeout_ms);
      const absl::Time now = absl::Now();
      if (now < last_worker_message_ + stall) {
        ArmStallTimerLocked(last_worker_message_ + stall);
      } else if (attempt_chunks_ == 0 && rc_.registry->IsHealthy(call_->worker())) {
        // Queued or prefilling on a worker that still answers health checks: keep waiting.
        ArmStallTimerLocked(now + stall);
      } else {
        call_->MarkStalled();
        stalled = call_;
      }
    }
  }
  if (stalled != nullptr) {
    PKV_LOG(WARNING) << "worker " << rc_.registry->address(stalled->worker())
                     << " stalled (silent for " << rc_.options->stall_timeout_ms
                     << " ms); treating it as lost";
    stalled->Cancel();
  }
  Unref();
}

}  // namespace pkv::router
