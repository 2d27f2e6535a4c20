#include "router/openai/openai_frontend.h"

#include <random>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "prometheus/text_serializer.h"
#include "router/openai/completion_call.h"
#include "router/openai/openai_response.h"

namespace pkv::openai {
namespace {

uint64_t RandomKey() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

ApiError NotFound(std::string message) {
  ApiError e;
  e.http_status = 404;
  e.type = "not_found_error";
  e.message = std::move(message);
  return e;
}

ApiError NoWorker() {
  ApiError e;
  e.http_status = 503;
  e.type = "service_unavailable";
  e.message = "no healthy worker; check the workers with `pkv health`";
  return e;
}

}  // namespace

OpenAiFrontend::OpenAiFrontend(OpenAiOptions options, std::shared_ptr<grpc::Channel> generation,
                               RouterHooks hooks, prometheus::Registry& registry)
    : options_(std::move(options)),
      channel_(std::move(generation)),
      stub_(pkv::v1::Generation::NewStub(channel_)),
      hooks_(std::move(hooks)),
      registry_(registry),
      metrics_(registry),
      id_key_(RandomKey()) {}

void OpenAiFrontend::Handle(std::shared_ptr<http::Exchange> exchange) {
  const http::Request& r = exchange->request();
  const bool get = r.method == "GET" || r.method == "HEAD";
  if (r.path == "/health" && get) {
    const bool ready = hooks_.ready();
    return Answer(*exchange, ready ? 200 : 503,
                  ready ? R"({"status":"ok"})"
                          "\n"
                        : R"({"status":"unavailable"})"
                          "\n");
  }
  if (r.path == "/metrics" && get) {
    return Answer(*exchange, 200, prometheus::TextSerializer().Serialize(registry_.Collect()),
                  "text/plain; version=0.0.4");
  }
  const bool completions = r.path == "/v1/completions";
  const bool chat = r.path == "/v1/chat/completions";
  const bool models = r.path == "/v1/models";
  if (!completions && !chat && !models) {
    return AnswerError(*exchange,
                       NotFound(absl::StrCat("no route ", r.method, " ", r.path.substr(0, 256))));
  }
  if (hooks_.authorized) {
    const std::string* authorization = r.Header("authorization");
    if (!hooks_.authorized(authorization == nullptr ? "" : *authorization)) {
      ApiError e;
      e.http_status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      e.message = authorization == nullptr
                      ? "missing API key: send the header 'Authorization: Bearer <key>'"
                      : "invalid API key";
      return AnswerError(*exchange, e);
    }
  }
  if (models) {
    if (!get) return AnswerError(*exchange, BadRequest("/v1/models takes GET"));
    return HandleModels(*exchange);
  }
  if (r.method != "POST") {
    ApiError e = BadRequest(absl::StrCat(r.path, " takes POST"));
    e.http_status = 405;
    return AnswerError(*exchange, e);
  }
  HandleCompletion(chat ? Endpoint::kChatCompletions : Endpoint::kCompletions, std::move(exchange));
}

void OpenAiFrontend::HandleModels(http::Exchange& exchange) {
  const std::optional<pkv::v1::ModelInfo> info = hooks_.model_info();
  if (!info.has_value()) return AnswerError(exchange, NoWorker());
  Answer(exchange, 200,
         ModelListJson(ServedName(*info), absl::ToUnixSeconds(absl::Now()), info->max_context()) +
             "\n");
}

void OpenAiFrontend::HandleCompletion(Endpoint endpoint, std::shared_ptr<http::Exchange> exchange) {
  const absl::Time start = absl::Now();
  const std::optional<pkv::v1::ModelInfo> info = hooks_.model_info();
  if (!info.has_value()) return AnswerError(*exchange, NoWorker());
  std::variant<CompletionRequest, ApiError> parsed =
      ParseCompletionRequest(endpoint, exchange->request().body, info->max_context());
  if (ApiError* error = std::get_if<ApiError>(&parsed)) return AnswerError(*exchange, *error);
  CompletionRequest& request = std::get<CompletionRequest>(parsed);
  const std::string served = ServedName(*info);
  if (!request.model.empty() && request.model != served) {
    ApiError e = NotFound(absl::StrCat("the model '", request.model.substr(0, 256),
                                       "' does not exist; this server serves '", served, "'"));
    e.param = "model";
    e.code = "model_not_found";
    return AnswerError(*exchange, e);
  }
  CompletionCallSetup setup;
  setup.stub = stub_.get();
  setup.header.endpoint = endpoint;
  setup.header.id = NextId(endpoint);
  setup.header.created = absl::ToUnixSeconds(start);
  setup.header.model = served;
  setup.header.logprobs = request.logprobs;
  request.request.set_request_id(setup.header.id);
  setup.request = std::move(request);
  if (const std::string* authorization = exchange->request().Header("authorization")) {
    setup.authorization = *authorization;
  }
  setup.deadline = start + options_.request_timeout;
  setup.start = start;
  setup.metrics = &metrics_;
  setup.exchange = std::move(exchange);
  in_flight_->fetch_add(1);
  setup.on_finished = [in_flight = in_flight_] { in_flight->fetch_sub(1); };
  CompletionCall::Start(std::move(setup));
}

std::string OpenAiFrontend::ServedName(const pkv::v1::ModelInfo& info) const {
  return options_.served_model_name.empty() ? info.model_name() : options_.served_model_name;
}

std::string OpenAiFrontend::NextId(Endpoint endpoint) {
  return absl::StrFormat("%s-%016x%08x",
                         endpoint == Endpoint::kChatCompletions ? "chatcmpl" : "cmpl", id_key_,
                         next_id_.fetch_add(1));
}

void OpenAiFrontend::Answer(http::Exchange& exchange, int status, std::string body,
                            std::string content_type) {
  metrics_.RecordRequest(exchange.request().path, status, 0.0);
  exchange.Respond({status, {{"content-type", std::move(content_type)}}, std::move(body)});
}

void OpenAiFrontend::AnswerError(http::Exchange& exchange, const ApiError& error) {
  metrics_.RecordRequest(exchange.request().path, error.http_status, 0.0);
  http::Headers headers = {{"content-type", "application/json"}};
  if (error.retry_after_s > 0)
    headers.emplace_back("retry-after", absl::StrCat(error.retry_after_s));
  exchange.Respond({error.http_status, std::move(headers), ErrorJson(error) + "\n"});
}

bool OpenAiFrontend::WaitIdle(absl::Time deadline) const {
  while (in_flight_->load() > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace pkv::openai
