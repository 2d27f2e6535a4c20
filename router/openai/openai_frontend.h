// The router's OpenAI-compatible HTTP API (served by http::HttpServer on --http_listen):
//   POST /v1/chat/completions   chat, rendered by the worker with the model's own chat template
//   POST /v1/completions        a text or token-id prompt
//   GET  /v1/models             the served model
//   GET  /health                200 while a worker is ready and the router is not draining, else
//   503 GET  /metrics               the router's Prometheus metrics (the same registry as gRPC's)
// Completions are calls to the router's own pkv.v1.Generation service over an in-process channel
// (completion_call.h), so HTTP and gRPC requests share validation, admission, placement, retries,
// migration and metrics; the HTTP layer adds only the OpenAI shapes and its own per-path metrics
// (http_metrics.h). With API keys configured, /v1/* needs `Authorization: Bearer <key>` (401
// otherwise); /health and /metrics stay open for probes and scrapers, as on gRPC.
//
// Thread-safety: Handle may be called from any thread; it never blocks.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "http/exchange.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "prometheus/registry.h"
#include "router/openai/http_metrics.h"
#include "router/openai/openai_request.h"

namespace pkv::openai {

struct OpenAiOptions {
  // The model name clients send and /v1/models lists; "" = the workers' model_name.
  std::string served_model_name;
  // The longest an HTTP completion may run (HTTP has no per-call deadline of its own).
  absl::Duration request_timeout = absl::Minutes(10);
};

// What the frontend asks of the router; each must be cheap and non-blocking.
struct RouterHooks {
  std::function<std::optional<pkv::v1::ModelInfo>()> model_info;  // nullopt: no healthy worker
  std::function<bool()> ready;                                    // /health
  // True when an Authorization header value carries a valid key; null: no keys configured.
  std::function<bool(std::string_view authorization)> authorized;
};

class OpenAiFrontend {
 public:
  OpenAiFrontend(OpenAiOptions options, std::shared_ptr<grpc::Channel> generation,
                 RouterHooks hooks, prometheus::Registry& registry);

  void Handle(std::shared_ptr<http::Exchange> exchange);

  // Waits until no completion is in flight (for shutdown); false at the deadline.
  bool WaitIdle(absl::Time deadline) const;

 private:
  void HandleCompletion(Endpoint endpoint, std::shared_ptr<http::Exchange> exchange);
  void HandleModels(http::Exchange& exchange);
  void Answer(http::Exchange& exchange, int status, std::string body,
              std::string content_type = "application/json");
  void AnswerError(http::Exchange& exchange, const ApiError& error);
  std::string ServedName(const pkv::v1::ModelInfo& info) const;
  std::string NextId(Endpoint endpoint);

  const OpenAiOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<pkv::v1::Generation::Stub> stub_;
  const RouterHooks hooks_;
  prometheus::Registry& registry_;
  HttpMetrics metrics_;
  const uint64_t id_key_;
  std::atomic<uint64_t> next_id_{0};
  std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace pkv::openai
