#include "worker/service/generate_stream.h"

#include <string>
#include <utility>

#include "common/grpc_status.h"

namespace pkv {

pkv::v1::WorkerGenerateResponse AcceptedResponse(const std::vector<int32_t>& prompt_token_ids,
                                                 const std::string& worker_id) {
  pkv::v1::WorkerGenerateResponse msg;
  auto* accepted = msg.mutable_accepted();
  accepted->mutable_prompt_token_ids()->Reserve(static_cast<int>(prompt_token_ids.size()));
  for (int32_t id : prompt_token_ids) accepted->add_prompt_token_ids(static_cast<uint32_t>(id));
  accepted->set_worker_id(worker_id);
  return msg;
}

pkv::v1::WorkerGenerateResponse ChunkResponse(pkv::v1::Chunk chunk) {
  pkv::v1::WorkerGenerateResponse msg;
  *msg.mutable_chunk() = std::move(chunk);
  return msg;
}

pkv::v1::WorkerGenerateResponse CompleteResponse(pkv::v1::Complete complete) {
  pkv::v1::WorkerGenerateResponse msg;
  *msg.mutable_complete() = std::move(complete);
  return msg;
}

void StreamOutbox::OnAccepted(const std::vector<int32_t>& prompt_token_ids) {
  Push(AcceptedResponse(prompt_token_ids, worker_id_), false, grpc::Status::OK);
}

void StreamOutbox::OnChunk(pkv::v1::Chunk chunk) {
  if (progress_ != nullptr) progress_->tokens_produced.fetch_add(chunk.token_ids_size());
  Push(ChunkResponse(std::move(chunk)), false, grpc::Status::OK);
}

void StreamOutbox::OnComplete(pkv::v1::Complete complete) {
  Push(CompleteResponse(std::move(complete)), true, grpc::Status::OK);
}

void StreamOutbox::OnError(const absl::Status& status) {
  // An error carries no message: the status ends the stream once queued messages are written.
  absl::MutexLock lock(&mu_);
  if (terminal_queued_) return;
  terminal_queued_ = true;
  final_status_ = ToGrpcStatus(status);
  MaybeStartWriteLocked();
}

bool StreamOutbox::Healthy() const {
  absl::MutexLock lock(&mu_);
  return !broken_;
}

AbortReason StreamOutbox::BrokenReason() const {
  absl::MutexLock lock(&mu_);
  return broken_reason_;
}

void StreamOutbox::BreakLocked(AbortReason reason) {
  if (!broken_) broken_reason_ = CountedReason(reason, deadline_);
  broken_ = true;
  queue_.clear();
}

void StreamOutbox::Push(pkv::v1::WorkerGenerateResponse msg, bool terminal,
                        grpc::Status final_status) {
  absl::MutexLock lock(&mu_);
  if (terminal_queued_ || broken_) return;
  if (queue_.size() >= kMaxQueuedMessages) {
    // The client is not reading: stop buffering, let the engine abort the request.
    BreakLocked(AbortReason::kSlowClient);
    terminal_queued_ = true;
    final_status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "client is not reading the stream; request aborted");
    MaybeStartWriteLocked();
    return;
  }
  queue_.push_back(std::move(msg));
  if (terminal) {
    terminal_queued_ = true;
    final_status_ = std::move(final_status);
  }
  MaybeStartWriteLocked();
}

void StreamOutbox::MaybeStartWriteLocked() {
  if (reactor_ == nullptr || write_in_flight_ || finished_) return;
  if (!queue_.empty() && !broken_) {
    write_in_flight_ = true;
    reactor_->StartWrite(&queue_.front());
    return;
  }
  if (terminal_queued_ || broken_) {
    finished_ = true;
    MarkFinished();
    reactor_->FinishWith(broken_ && final_status_.ok()
                             ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled")
                             : final_status_);
  }
}

void StreamOutbox::WriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  if (!queue_.empty()) queue_.pop_front();
  if (!ok) BreakLocked(AbortReason::kClientCancel);
  MaybeStartWriteLocked();
}

void StreamOutbox::Cancelled() {
  absl::MutexLock lock(&mu_);
  BreakLocked(AbortReason::kClientCancel);
  MaybeStartWriteLocked();
}

AbortReason StreamOutbox::CountedReason(AbortReason reason, absl::Time deadline) {
  return reason == AbortReason::kClientCancel && absl::Now() + kDeadlineSlack >= deadline
             ? AbortReason::kDeadline
             : reason;
}

void StreamOutbox::Detach() {
  absl::MutexLock lock(&mu_);
  MarkFinished();
  reactor_ = nullptr;
  BreakLocked(AbortReason::kClientCancel);
}

GenerateStream::GenerateStream(grpc::CallbackServerContext* context,
                               std::shared_ptr<StreamOutbox> outbox,
                               std::function<void()> on_cancel)
    : context_(context), outbox_(std::move(outbox)), on_cancel_(std::move(on_cancel)) {
  absl::MutexLock lock(&outbox_->mu_);
  outbox_->reactor_ = this;
  outbox_->MaybeStartWriteLocked();
}

void GenerateStream::FinishWith(const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    context_->AddTrailingMetadata("grpc-retry-pushback-ms", std::to_string(kRetryPushbackMs));
  }
  Finish(status);
}

void GenerateStream::OnWriteDone(bool ok) { outbox_->WriteDone(ok); }

void GenerateStream::OnCancel() {
  outbox_->Cancelled();
  if (on_cancel_) on_cancel_();
}

void GenerateStream::OnDone() {
  outbox_->Detach();
  delete this;
}

}  // namespace pkv
