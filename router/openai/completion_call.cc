#include "router/openai/completion_call.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pkv::openai {
namespace {

int RetryPushbackMs(const grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("grpc-retry-pushback-ms");
  int ms = 0;
  if (it != trailers.end() &&
      absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &ms)) {
    return ms;
  }
  return 0;
}

http::Headers JsonHeaders() { return {{"content-type", "application/json"}}; }

}  // namespace

void CompletionCall::Start(CompletionCallSetup setup) {
  auto* call = new CompletionCall(std::move(setup));
  {
    absl::MutexLock lock(&call->cancel_->mu);
    call->cancel_->ctx = &call->ctx_;
  }
  // A client that leaves cancels the call (and with it the worker's stream).
  call->s_.exchange->SetOnGone([handle = call->cancel_] {
    absl::MutexLock lock(&handle->mu);
    handle->client_gone = true;
    if (handle->ctx != nullptr) handle->ctx->TryCancel();
  });
  call->s_.stub->async()->Generate(&call->ctx_, &call->s_.request.request, call);
  call->StartRead(&call->response_);
  call->StartCall();
}

CompletionCall::CompletionCall(CompletionCallSetup setup) : s_(std::move(setup)) {
  if (!s_.authorization.empty()) ctx_.AddMetadata("authorization", s_.authorization);
  if (s_.deadline != absl::InfiniteFuture()) ctx_.set_deadline(absl::ToChronoTime(s_.deadline));
}

void CompletionCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  if (response_.has_chunk()) {
    OnChunk(response_.chunk());
  } else if (response_.has_complete()) {
    complete_ = std::move(*response_.mutable_complete());
  }
  response_.Clear();
  StartRead(&response_);
}

void CompletionCall::OnChunk(const pkv::v1::Chunk& chunk) {
  if (!ttft_recorded_ && chunk.token_ids_size() > 0) {
    ttft_recorded_ = true;
    s_.metrics->RecordTimeToFirstToken(s_.exchange->request().path,
                                       absl::ToDoubleSeconds(absl::Now() - s_.start));
  }
  if (!s_.request.stream) {
    text_ += chunk.text();
    if (s_.header.logprobs) {
      for (const pkv::v1::TokenLogprob& lp : chunk.logprobs()) *logprobs_.Add() = lp;
    }
    return;
  }
  StartStreamIfNeeded();
  s_.exchange->Write(
      SseEvent(StreamChunkJson(s_.header, chunk, !sent_first_chunk_, s_.request.include_usage)));
  sent_first_chunk_ = true;
}

void CompletionCall::StartStreamIfNeeded() {
  if (stream_started_) return;
  stream_started_ = true;
  s_.exchange->StartStream(200, {{"content-type", "text/event-stream"},
                                 {"cache-control", "no-cache"},
                                 {"x-request-id", s_.header.id}});
}

void CompletionCall::OnDone(const grpc::Status& status) {
  {
    absl::MutexLock lock(&cancel_->mu);
    cancel_->ctx = nullptr;
  }
  if (status.ok() && complete_.has_value()) {
    FinishOk();
  } else if (status.ok()) {
    FinishError(grpc::Status(grpc::StatusCode::INTERNAL, "the stream ended without a result"));
  } else {
    FinishError(status);
  }
  std::function<void()> on_finished = std::move(s_.on_finished);
  delete this;
  if (on_finished) on_finished();
}

void CompletionCall::FinishOk() {
  if (!s_.request.stream) {
    s_.exchange->Respond(
        {200, JsonHeaders(), CompletionJson(s_.header, text_, logprobs_, *complete_) + "\n"});
    return Record(200);
  }
  StartStreamIfNeeded();
  if (!sent_first_chunk_ && s_.header.endpoint == Endpoint::kChatCompletions) {
    // No token at all (e.g. EOS first): the role still opens the assistant's message.
    s_.exchange->Write(SseEvent(
        StreamChunkJson(s_.header, pkv::v1::Chunk(), /*first=*/true, s_.request.include_usage)));
  }
  s_.exchange->Write(SseEvent(StreamFinishJson(s_.header, *complete_, s_.request.include_usage)));
  if (s_.request.include_usage)
    s_.exchange->Write(SseEvent(StreamUsageJson(s_.header, *complete_)));
  s_.exchange->Write(std::string(kSseDone));
  s_.exchange->End();
  Record(200);
}

void CompletionCall::FinishError(const grpc::Status& status) {
  bool client_gone = false;
  {
    absl::MutexLock lock(&cancel_->mu);
    client_gone = cancel_->client_gone;
  }
  if (client_gone) return Record(499);  // nobody to answer; the cancel reached the worker
  const ApiError error = FromGrpcStatus(status, RetryPushbackMs(ctx_));
  if (stream_started_) {
    // The 200 is out: the error travels as an event, then the stream ends as usual.
    s_.exchange->Write(SseEvent(ErrorJson(error)));
    s_.exchange->Write(std::string(kSseDone));
    s_.exchange->End();
    return Record(200);
  }
  http::Headers headers = JsonHeaders();
  if (error.retry_after_s > 0)
    headers.emplace_back("retry-after", absl::StrCat(error.retry_after_s));
  s_.exchange->Respond({error.http_status, std::move(headers), ErrorJson(error) + "\n"});
  Record(error.http_status);
}

void CompletionCall::Record(int http_status) {
  s_.metrics->RecordRequest(s_.exchange->request().path, http_status,
                            absl::ToDoubleSeconds(absl::Now() - s_.start));
}

}  // namespace pkv::openai
