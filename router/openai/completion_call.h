// One OpenAI completion (chat or text) carried out as a call to the router's own
// pkv.v1.Generation service over its in-process channel, so HTTP requests get exactly what gRPC
// requests get: validation, admission and queueing, placement, retries, migration, deadlines.
//
// The answer goes back through the request's http::Exchange:
//   stream=false  the chunks are gathered; one JSON object (or an error) at the end;
//   stream=true   the HTTP status waits for the first token (so a refusal before it, e.g. admission
//                 full, is a real 429/503 rather than an event in a 200 stream); then one SSE event
//                 per chunk, the finish event, the usage event when asked, and "data: [DONE]". An
//                 error after the first token is sent as an {"error": ...} event before [DONE].
// A client that leaves (Exchange on-gone) cancels the call, which cancels the worker's stream: its
// KV pages are freed within a step.
//
// Lifetime: self-owned; deleted after gRPC's OnDone, when the answer has been handed over.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "http/exchange.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "router/openai/http_metrics.h"
#include "router/openai/openai_request.h"
#include "router/openai/openai_response.h"

namespace pkv::openai {

struct CompletionCallSetup {
  pkv::v1::Generation::Stub* stub = nullptr;  // the in-process channel's; outlives the call
  CompletionRequest request;                  // request.request carries request_id = header.id
  ResponseHeader header;
  std::shared_ptr<http::Exchange> exchange;
  std::string authorization;  // the client's Authorization header, forwarded ("" = none)
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time start;  // when the HTTP request was complete
  HttpMetrics* metrics = nullptr;
  std::function<void()> on_finished;  // after the answer was handed to the exchange
};

class CompletionCall final : public grpc::ClientReadReactor<pkv::v1::GenerateResponse> {
 public:
  static void Start(CompletionCallSetup setup);

 private:
  // Shared with the exchange's on-gone callback, which may outlive the call.
  struct CancelHandle {
    absl::Mutex mu;
    grpc::ClientContext* ctx ABSL_GUARDED_BY(mu) = nullptr;
    bool client_gone ABSL_GUARDED_BY(mu) = false;
  };

  explicit CompletionCall(CompletionCallSetup setup);
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  void OnChunk(const pkv::v1::Chunk& chunk);
  void StartStreamIfNeeded();
  void FinishOk();
  void FinishError(const grpc::Status& status);
  void Record(int http_status);

  CompletionCallSetup s_;
  grpc::ClientContext ctx_;
  std::shared_ptr<CancelHandle> cancel_ = std::make_shared<CancelHandle>();
  pkv::v1::GenerateResponse response_;
  // Touched only by gRPC's reactions, which never run concurrently for one call.
  bool stream_started_ = false;
  bool sent_first_chunk_ = false;
  bool ttft_recorded_ = false;
  std::string text_;
  google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob> logprobs_;
  std::optional<pkv::v1::Complete> complete_;
};

}  // namespace pkv::openai
