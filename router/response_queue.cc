#include "router/response_queue.h"

#include <utility>

namespace pkv::router {
namespace {

void AppendChunk(pkv::v1::Chunk& into, pkv::v1::Chunk&& more) {
  into.mutable_token_ids()->MergeFrom(more.token_ids());
  into.mutable_text()->append(more.text());
  for (auto& logprob : *more.mutable_logprobs()) {
    *into.add_logprobs() = std::move(logprob);
  }
}

}  // namespace

void ResponseQueue::PushChunk(pkv::v1::Chunk chunk) {
  if (finish_started_ || final_.has_value()) return;
  tokens_queued_ += chunk.token_ids_size();
  if (!pending_.empty() && pending_.back().has_chunk()) {
    AppendChunk(*pending_.back().mutable_chunk(), std::move(chunk));
    return;
  }
  pkv::v1::GenerateResponse response;
  *response.mutable_chunk() = std::move(chunk);
  pending_.push_back(std::move(response));
}

void ResponseQueue::PushComplete(pkv::v1::Complete complete) {
  if (finish_started_ || final_.has_value()) return;
  pkv::v1::GenerateResponse response;
  *response.mutable_complete() = std::move(complete);
  pending_.push_back(std::move(response));
  final_ = grpc::Status::OK;
}

void ResponseQueue::SetFinal(grpc::Status status) {
  if (!final_.has_value()) final_ = std::move(status);
}

void ResponseQueue::DropPending() {
  pending_.clear();
  if (!finish_started_) final_.reset();
}

ResponseQueue::Action ResponseQueue::Next() {
  Action action;
  if (finish_started_ || write_in_flight_) return action;
  if (!pending_.empty()) {
    in_flight_ = std::move(pending_.front());
    pending_.pop_front();
    action.message = &in_flight_;
    // The Complete goes out together with the OK status (one batch, no OnWriteDone).
    if (pending_.empty() && in_flight_.has_complete() && final_.has_value() && final_->ok()) {
      action.kind = Action::Kind::kWriteAndFinish;
      action.status = *final_;
      finish_started_ = true;
    } else {
      action.kind = Action::Kind::kWrite;
      write_in_flight_ = true;
    }
    return action;
  }
  if (final_.has_value()) {
    action.kind = Action::Kind::kFinish;
    action.status = *final_;
    finish_started_ = true;
  }
  return action;
}

}  // namespace pkv::router
