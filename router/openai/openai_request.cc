#include "router/openai/openai_request.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/utf8.h"

namespace pkv::openai {
namespace {

using Json = pkv::JsonValue;

constexpr int kMaxTopLogprobs = 20;
constexpr size_t kMaxSessionBytes = 256;  // longer `user` values are not used as session keys

// Each reader returns an error naming `name` when the field is present with the wrong type or
// range; absent and null fields leave the output untouched.
class FieldReader {
 public:
  explicit FieldReader(const Json& body) : body_(body) {}
  const Json* Get(const std::string& name) const {
    const Json* v = body_.Find(name);
    return v == nullptr || v->is_null() ? nullptr : v;
  }
  std::optional<ApiError> Bool(const std::string& name, bool* out) const {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_bool()) return TypeError(name, "a boolean");
    *out = v->bool_value();
    return std::nullopt;
  }
  std::optional<ApiError> Number(const std::string& name, double lo, double hi,
                                 std::optional<double>* out) const {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->number())) return TypeError(name, "a number");
    if (v->number() < lo || v->number() > hi) {
      return BadRequest(
          absl::StrCat("'", name, "' must be in [", lo, ", ", hi, "], got ", v->number()),
          std::string(name));
    }
    *out = v->number();
    return std::nullopt;
  }
  std::optional<ApiError> Int(const std::string& name, int64_t lo, int64_t hi,
                              std::optional<int64_t>* out) const {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_integer()) return TypeError(name, "an integer");
    if (v->integer() < lo || v->integer() > hi) {
      return BadRequest(
          absl::StrCat("'", name, "' must be in [", lo, ", ", hi, "], got ", v->integer()),
          std::string(name));
    }
    *out = v->integer();
    return std::nullopt;
  }
  static ApiError TypeError(const std::string& name, const std::string& what) {
    return BadRequest(absl::StrCat("'", name, "' must be ", what), std::string(name));
  }

 private:
  const Json& body_;
};

#define PKV_TRY(expr)                                    \
  do {                                                   \
    if (std::optional<ApiError> _e = (expr)) return *_e; \
  } while (0)

std::optional<ApiError> RefuseUnsupported(const FieldReader& f) {
  for (const char* name : {"tools", "functions", "logit_bias"}) {
    const Json* v = f.Get(name);
    const bool empty = v == nullptr || (v->is_array() && v->items().empty()) ||
                       (v->is_object() && v->members().empty());
    if (!empty) return BadRequest(absl::StrCat("'", name, "' is not supported"), name);
  }
  for (const char* name : {"presence_penalty", "frequency_penalty", "repetition_penalty"}) {
    const Json* v = f.Get(name);
    const double neutral = std::string_view(name) == "repetition_penalty" ? 1.0 : 0.0;
    if (v != nullptr && !(v->is_number() && v->number() == neutral)) {
      return BadRequest(absl::StrCat("'", name, "' is not supported (only ", neutral, ")"), name);
    }
  }
  if (const Json* v = f.Get("response_format")) {
    const Json* type = v->Find("type");
    if (!(v->is_object() && type != nullptr && type->is_string() && type->str() == "text")) {
      return BadRequest("'response_format' is not supported (only {\"type\": \"text\"})",
                        "response_format");
    }
  }
  bool echo = false;
  PKV_TRY(f.Bool("echo", &echo));
  if (echo) return BadRequest("'echo' is not supported", "echo");
  if (const Json* v = f.Get("suffix"); v != nullptr && !(v->is_string() && v->str().empty())) {
    return BadRequest("'suffix' is not supported", "suffix");
  }
  std::optional<int64_t> n, best_of;
  PKV_TRY(f.Int("n", 1, 128, &n));
  if (n.value_or(1) != 1) {
    return BadRequest(absl::StrCat("'n' must be 1 (one choice per request), got ", *n), "n");
  }
  PKV_TRY(f.Int("best_of", 1, 128, &best_of));
  if (best_of.value_or(1) != 1) return BadRequest("'best_of' must be 1", "best_of");
  return std::nullopt;
}

// A message's content: a string, null, or text parts joined with "\n".
std::optional<ApiError> ReadContent(const Json& message, size_t index, std::string* out) {
  const std::string param = absl::StrCat("messages[", index, "].content");
  const Json* content = message.Find("content");
  if (content == nullptr || content->is_null()) return std::nullopt;
  if (content->is_string()) {
    *out = content->str();
    return std::nullopt;
  }
  if (!content->is_array()) return FieldReader::TypeError(param, "a string or a list of parts");
  for (size_t i = 0; i < content->items().size(); ++i) {
    const Json& part = content->items()[i];
    const Json* type = part.Find("type");
    const Json* text = part.Find("text");
    if (!part.is_object() || type == nullptr || !type->is_string() || type->str() != "text" ||
        text == nullptr || !text->is_string()) {
      return BadRequest(absl::StrCat(param, "[", i,
                                     "] must be a {\"type\": \"text\", \"text\": "
                                     "...} part (other content types are not supported)"),
                        param);
    }
    if (i > 0) out->push_back('\n');
    out->append(text->str());
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const FieldReader& f, pkv::v1::GenerateRequest* request) {
  const Json* messages = f.Get("messages");
  if (messages == nullptr) return BadRequest("'messages' is required", "messages");
  if (!messages->is_array()) return FieldReader::TypeError("messages", "a list of messages");
  if (messages->items().empty()) return BadRequest("'messages' must not be empty", "messages");
  pkv::v1::ChatPrompt* chat = request->mutable_chat();
  chat->set_add_generation_prompt(true);
  for (size_t i = 0; i < messages->items().size(); ++i) {
    const Json& m = messages->items()[i];
    const Json* role = m.Find("role");
    if (!m.is_object() || role == nullptr || !role->is_string()) {
      return BadRequest(absl::StrCat("messages[", i, "] must be an object with a string 'role'"),
                        absl::StrCat("messages[", i, "].role"));
    }
    pkv::v1::ChatMessage* out = chat->add_messages();
    out->set_role(role->str());
    PKV_TRY(ReadContent(m, i, out->mutable_content()));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadTokenIds(const Json& list, pkv::v1::GenerateRequest* request) {
  for (const Json& id : list.items()) {
    if (!id.is_integer() || id.integer() < 0 || id.integer() > UINT32_MAX) {
      return BadRequest("'prompt' token ids must be non-negative integers", "prompt");
    }
    request->mutable_token_ids()->add_ids(static_cast<uint32_t>(id.integer()));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadPrompt(const FieldReader& f, pkv::v1::GenerateRequest* request) {
  const Json* prompt = f.Get("prompt");
  if (prompt == nullptr) return BadRequest("'prompt' is required", "prompt");
  if (prompt->is_array() && prompt->items().size() == 1 &&
      (prompt->items()[0].is_string() || prompt->items()[0].is_array())) {
    prompt = &prompt->items()[0];  // a batch of one
  }
  if (prompt->is_string()) {
    request->set_text(prompt->str());
    return std::nullopt;
  }
  if (prompt->is_array() && !prompt->items().empty() && prompt->items()[0].is_number()) {
    return ReadTokenIds(*prompt, request);
  }
  if (prompt->is_array() && prompt->items().size() > 1) {
    return BadRequest("'prompt' with several prompts is not supported: send one per request",
                      "prompt");
  }
  return FieldReader::TypeError("prompt", "a string or a list of token ids");
}

std::optional<ApiError> ReadStop(const FieldReader& f, pkv::v1::SamplingParams* sampling) {
  const Json* stop = f.Get("stop");
  if (stop == nullptr) return std::nullopt;
  if (stop->is_string()) {
    if (!stop->str().empty()) sampling->add_stop(stop->str());
    return std::nullopt;
  }
  if (!stop->is_array()) return FieldReader::TypeError("stop", "a string or a list of strings");
  for (const Json& s : stop->items()) {
    if (!s.is_string()) return FieldReader::TypeError("stop", "a string or a list of strings");
    if (!s.str().empty()) sampling->add_stop(s.str());
  }
  return std::nullopt;
}

std::optional<ApiError> ReadLogprobs(Endpoint endpoint, const FieldReader& f,
                                     CompletionRequest* out) {
  std::optional<int64_t> top;
  if (endpoint == Endpoint::kChatCompletions) {
    PKV_TRY(f.Bool("logprobs", &out->logprobs));
    PKV_TRY(f.Int("top_logprobs", 0, kMaxTopLogprobs, &top));
    if (top.has_value() && *top > 0 && !out->logprobs) {
      return BadRequest("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    }
  } else {
    PKV_TRY(f.Int("logprobs", 0, kMaxTopLogprobs, &top));
    out->logprobs = top.has_value();
  }
  out->top_logprobs = static_cast<int>(top.value_or(0));
  pkv::v1::SamplingParams* sampling = out->request.mutable_sampling();
  sampling->set_logprobs(out->logprobs);
  sampling->set_top_logprobs(static_cast<uint32_t>(out->top_logprobs));
  return std::nullopt;
}

std::optional<ApiError> ReadSampling(const FieldReader& f, uint32_t max_context,
                                     pkv::v1::SamplingParams* sampling) {
  std::optional<int64_t> max_tokens, max_completion_tokens, top_k, seed;
  PKV_TRY(f.Int("max_tokens", 1, UINT32_MAX, &max_tokens));
  PKV_TRY(f.Int("max_completion_tokens", 1, UINT32_MAX, &max_completion_tokens));
  if (max_completion_tokens.has_value()) max_tokens = max_completion_tokens;
  if (max_tokens.has_value()) {
    sampling->set_max_tokens(static_cast<uint32_t>(*max_tokens));
  } else {
    // As vLLM: without a limit, up to the end of the context, whatever the prompt leaves.
    sampling->set_max_tokens(max_context > 1 ? max_context - 1 : 1);
    sampling->set_clamp_max_tokens(true);
  }
  std::optional<double> temperature, top_p, min_p;
  PKV_TRY(f.Number("temperature", 0, 2, &temperature));
  PKV_TRY(f.Number("top_p", 0, 1, &top_p));
  PKV_TRY(f.Number("min_p", 0, 1, &min_p));
  PKV_TRY(f.Int("top_k", -1, INT32_MAX, &top_k));
  PKV_TRY(f.Int("seed", INT64_MIN, INT64_MAX, &seed));
  if (temperature.has_value()) sampling->set_temperature(static_cast<float>(*temperature));
  if (top_p.has_value()) {
    if (*top_p == 0) return BadRequest("'top_p' must be in (0, 1], got 0", "top_p");
    sampling->set_top_p(static_cast<float>(*top_p));
  }
  if (min_p.has_value()) sampling->set_min_p(static_cast<float>(*min_p));
  if (top_k.value_or(0) > 0) sampling->set_top_k(static_cast<uint32_t>(*top_k));  // -1, 0: off
  if (seed.has_value()) sampling->set_seed(static_cast<uint64_t>(*seed));
  bool ignore_eos = false;
  PKV_TRY(f.Bool("ignore_eos", &ignore_eos));
  sampling->set_ignore_eos(ignore_eos);
  return ReadStop(f, sampling);
}

std::optional<ApiError> ReadStreaming(const FieldReader& f, CompletionRequest* out) {
  PKV_TRY(f.Bool("stream", &out->stream));
  if (const Json* options = f.Get("stream_options")) {
    if (!options->is_object()) return FieldReader::TypeError("stream_options", "an object");
    if (!out->stream) {
      return BadRequest("'stream_options' is only allowed with 'stream': true", "stream_options");
    }
    PKV_TRY(FieldReader(*options).Bool("include_usage", &out->include_usage));
  }
  return std::nullopt;
}

}  // namespace

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(Endpoint endpoint,
                                                                 std::string_view body,
                                                                 uint32_t max_context) {
  const size_t bad = utf8::FirstInvalid(body);
  if (bad != body.size()) {
    return BadRequest(absl::StrCat("the request body is not valid UTF-8 (byte ", bad, ")"));
  }
  absl::StatusOr<Json> parsed = ParseJson(body);
  if (!parsed.ok()) {
    return BadRequest(
        absl::StrCat("the request body is not valid JSON: ", parsed.status().message()));
  }
  if (!parsed->is_object()) return BadRequest("the request body must be a JSON object");
  const FieldReader f(*parsed);
  CompletionRequest out;
  out.endpoint = endpoint;
  if (const Json* model = f.Get("model")) {
    if (!model->is_string()) return FieldReader::TypeError("model", "a string");
    out.model = model->str();
  }
  PKV_TRY(RefuseUnsupported(f));
  if (endpoint == Endpoint::kChatCompletions) {
    PKV_TRY(ReadMessages(f, &out.request));
  } else {
    PKV_TRY(ReadPrompt(f, &out.request));
  }
  PKV_TRY(ReadSampling(f, max_context, out.request.mutable_sampling()));
  PKV_TRY(ReadLogprobs(endpoint, f, &out));
  PKV_TRY(ReadStreaming(f, &out));
  if (const Json* user = f.Get("user")) {
    if (!user->is_string()) return FieldReader::TypeError("user", "a string");
    // The end user's id keeps their conversation on one worker, where its prefix is cached.
    if (user->str().size() <= kMaxSessionBytes) out.request.set_session_id(user->str());
  }
  return out;
}

}  // namespace pkv::openai
