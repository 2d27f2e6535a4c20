// GenerateStream, worker-facing half: relaying worker messages, classifying a worker's failure,
// failover before the first chunk, migration or ABORTED after it, and stall detection.
#include <algorithm>
#include <memory>
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
          first_chunk_at_ = last_worker_message_;
          rc_.metrics->RecordTimeToFirstToken(
              absl::ToDoubleSeconds(last_worker_message_ - start_time_));
          rc_.metrics->RecordFirstTokenStage(
              RouterMetrics::FirstTokenStage::kWorker,
              absl::ToDoubleSeconds(last_worker_message_ - attempt_started_));
        }
        ++attempt_chunks_;
        const auto& ids = message.chunk().token_ids();
        attempt_tokens_ += static_cast<uint64_t>(ids.size());
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
  bool proven = false;
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
          proven = call->stall_proven();
          why = last_error_.error_message();
        }
      }
    }
  }
  if (lost_worker >= 0 && proven) {
    rc_.registry->ReportFailed(lost_worker, why);  // the worker's own answer convicted it
  } else if (lost_worker >= 0) {
    rc_.registry->ReportLost(lost_worker, why);  // ejected only if it fails a health check too
  }
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
      // Before Accepted, no worker code says CANCELLED: gRPC does, for a call its server cut
      // while shutting down (a worker exiting after a fatal error), so the request never ran
      // and goes elsewhere. After Accepted, a CANCELLED the router did not cause was said by a
      // live worker (an Abort sent to it directly): passed through, the worker is not at fault.
      return !call->got_message();
    default:
      return false;  // other codes are the worker's answers
  }
}

void GenerateStream::HandleWorkerFailureLocked(WorkerCall* call, const grpc::Status& status) {
  const bool lost = IsLostWorker(call, status);
  const std::string worker = rc_.registry->WorkerId(call->worker());
  const std::string what =
      call->stalled() ? stall_reason_
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
  } else if (lost || exhausted) {
    // RESOURCE_EXHAUSTED after tokens: the worker dropped the stream because the router was not
    // reading it (starved); the worker is fine, the stream moves (ejection only when lost).
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
  const absl::Duration delay = RetryBackoff(attempt, rc_.options->retry_backoff,
                                            rc_.options->retry_backoff_max, rc_.ids->NextRandom());
  if (deadline_ <= absl::Now() + delay) {
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
  std::unique_ptr<ProgressProbe> probe;
  {
    absl::MutexLock lock(&mu_);
    stall_timer_ = 0;
    if (call_ != nullptr && !completed_ && !out_.has_final() && probing_ != call_) {
      const absl::Duration stall = rc_.options->stall_timeout;
      const absl::Time now = absl::Now();
      if (now < last_worker_message_ + stall) {
        ArmStallTimerLocked(last_worker_message_ + stall);
      } else {
        // Silent by the router's clock, which proves nothing when the router itself was starved
        // or paused: ask the worker (the answer re-arms the timer or convicts).
        probe = std::make_unique<ProgressProbe>();
        probe->call = call_;
        probe->sent_at = now;
        probe->request.set_request_id(request_.request_id());
        probe->ctx.set_deadline(absl::ToChronoTime(now + stall));
        probing_ = call_;
        Ref();  // dropped by OnProgressAnswer
      }
    }
  }
  if (probe != nullptr) {
    ProgressProbe* raw = probe.release();
    raw->call->stub()->async()->GetProgress(&raw->ctx, &raw->request, &raw->response,
                                            [this, raw](grpc::Status status) {
                                              OnProgressAnswer(raw, status);
                                              delete raw;
                                            });
  }
  Unref();
}

void GenerateStream::OnProgressAnswer(const ProgressProbe* probe, const grpc::Status& status) {
  WorkerCall* stalled = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (probing_ == probe->call) probing_ = nullptr;
    if (probe->call == call_ && !completed_ && !out_.has_final()) {
      const StallJudgement judged = JudgeSilenceLocked(*probe, status);
      rc_.metrics->RecordStallCheck(judged.verdict);
      if (judged.verdict == RouterMetrics::StallVerdict::kConvicted) {
        stall_reason_ = judged.reason;
        call_->MarkStalled(judged.proven);
        stalled = call_;
      } else {
        ArmStallTimerLocked(judged.next_check);
      }
    }
  }
  if (stalled != nullptr) {
    PKV_LOG(WARNING) << "worker " << rc_.registry->address(stalled->worker()) << " stalled request "
                     << probe->request.request_id() << " (" << stall_reason_
                     << "); treating it as lost";
    stalled->Cancel();
  }
  Flush();
  Unref();
}

GenerateStream::StallJudgement GenerateStream::JudgeSilenceLocked(const ProgressProbe& probe,
                                                                  const grpc::Status& status) {
  const absl::Duration stall = rc_.options->stall_timeout;
  const absl::Time now = absl::Now();
  using Verdict = RouterMetrics::StallVerdict;
  StallJudgement verdict;
  verdict.next_check = now + stall;
  if (last_worker_message_ > probe.sent_at) {
    // The stream spoke while the probe was out: the silence was the router's.
    inconclusive_probes_ = 0;
    verdict.next_check = last_worker_message_ + stall;
    return verdict;
  }
  const pkv::v1::Progress& p = probe.response;
  if (!status.ok()) {
    verdict.verdict = Verdict::kConvicted;
    verdict.reason = absl::StrCat("silent for ", SilenceMs(now), " ms and no answer to a progress ",
                                  "check: ", status.error_message());
    return verdict;  // unreachable, not proven: the registry verifies before ejecting
  }
  if (absl::Milliseconds(p.engine_stalled_ms()) >= rc_.options->stall_timeout) {
    verdict.verdict = Verdict::kConvicted;
    verdict.proven = true;
    verdict.reason =
        absl::StrCat("silent for ", SilenceMs(now), " ms; its engine has not finished ",
                     "a step for ", p.engine_stalled_ms(), " ms");
    return verdict;
  }
  if (p.found() && !p.finished() && p.tokens_produced() <= attempt_tokens_) {
    // Queued, prefilling or preempted while the engine steps: a legitimate wait. Check again
    // when a wedged engine would have crossed the stall timeout.
    inconclusive_probes_ = 0;
    verdict.verdict = Verdict::kWaiting;
    verdict.next_check =
        now + std::max(absl::Milliseconds(100), stall - absl::Milliseconds(p.engine_stalled_ms()));
    return verdict;
  }
  // Produced or finished but not received, or unknown (ended before the router could ask): the
  // worker's output is on its way unless this keeps happening with nothing arriving.
  if (++inconclusive_probes_ < kMaxInconclusiveProbes) return verdict;
  verdict.verdict = Verdict::kConvicted;
  verdict.proven = true;
  verdict.reason =
      p.found()
          ? absl::StrCat("silent for ", SilenceMs(now), " ms though it reports ",
                         p.tokens_produced(), " tokens produced (", attempt_tokens_, " received)")
          : absl::StrCat("silent for ", SilenceMs(now), " ms and it does not know the request");
  return verdict;
}

}  // namespace pkv::router
