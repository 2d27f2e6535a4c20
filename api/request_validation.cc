#include "api/request_validation.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv::api {
namespace {

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }

bool IsRequestIdByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

// Offset of the first malformed byte, or text.size() when the text is valid.
size_t FirstInvalidUtf8Offset(absl::string_view text) {
  return utf8::FirstInvalid(std::string_view(text.data(), text.size()));
}

absl::Status ValidateChat(const pkv::v1::ChatPrompt& chat, const RequestLimits& limits) {
  if (chat.messages().empty()) return Invalid("chat.messages must not be empty");
  if (static_cast<uint32_t>(chat.messages_size()) > limits.max_chat_messages) {
    return Invalid(absl::StrCat("chat.messages has ", chat.messages_size(),
                                " messages, more than the limit of ", limits.max_chat_messages));
  }
  uint64_t bytes = 0;
  for (int i = 0; i < chat.messages_size(); ++i) {
    const pkv::v1::ChatMessage& m = chat.messages(i);
    if (m.role() != "system" && m.role() != "user" && m.role() != "assistant" &&
        m.role() != "tool" && m.role() != "developer") {
      return Invalid(absl::StrCat("chat.messages[", i, "].role must be one of system, user, ",
                                  "assistant, tool, developer; got '", m.role().substr(0, 32),
                                  "'"));
    }
    bytes += m.content().size();
  }
  if (bytes > limits.max_prompt_text_bytes) {
    return Invalid(absl::StrCat("chat.messages hold ", bytes,
                                " bytes of content, more than the limit of ",
                                limits.max_prompt_text_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidatePrompt(const pkv::v1::GenerateRequest& request,
                            const pkv::v1::ModelInfo& model, const RequestLimits& limits) {
  using Request = pkv::v1::GenerateRequest;
  switch (request.prompt_case()) {
    case Request::PROMPT_NOT_SET:
      return Invalid("prompt must be set: give token_ids, text or chat");
    case Request::kChat:
      return ValidateChat(request.chat(), limits);
    case Request::kText: {
      const std::string& text = request.text();
      if (text.empty()) return Invalid("text must not be empty");
      if (text.size() > limits.max_prompt_text_bytes) {
        return Invalid(absl::StrCat("text has ", text.size(), " bytes, more than the limit of ",
                                    limits.max_prompt_text_bytes));
      }
      const size_t bad = FirstInvalidUtf8Offset(text);
      if (bad != text.size()) {
        return Invalid(absl::StrFormat("text must be valid UTF-8, got byte 0x%02x at offset %d",
                                       static_cast<unsigned char>(text[bad]), bad));
      }
      return absl::OkStatus();
    }
    case Request::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return Invalid("token_ids must not be empty");
      const uint32_t max_prompt =
          limits.max_prompt_tokens > 0 ? limits.max_prompt_tokens : model.max_context() - 1;
      if (static_cast<uint64_t>(ids.size()) > max_prompt) {
        return Invalid(absl::StrCat("token_ids has ", ids.size(),
                                    " tokens, more than the limit of ", max_prompt,
                                    " prompt tokens (max_context ", model.max_context(), ")"));
      }
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] >= model.vocab_size()) {
          return Invalid(absl::StrCat("token_ids[", i, "] must be < vocab_size ",
                                      model.vocab_size(), ", got ", ids[i],
                                      " (token id out of vocabulary)"));
        }
      }
      return absl::OkStatus();
    }
  }
  return Invalid("prompt has an unknown kind");
}

absl::Status ValidateStops(const pkv::v1::SamplingParams& sampling, const pkv::v1::ModelInfo& model,
                           const RequestLimits& limits) {
  if (static_cast<uint32_t>(sampling.stop_size()) > limits.max_stop_strings) {
    return Invalid(absl::StrCat("sampling.stop has ", sampling.stop_size(),
                                " strings, more than the limit of ", limits.max_stop_strings));
  }
  for (int i = 0; i < sampling.stop_size(); ++i) {
    const std::string& stop = sampling.stop(i);
    if (stop.empty()) return Invalid(absl::StrCat("sampling.stop[", i, "] must not be empty"));
    if (stop.size() > limits.max_stop_string_bytes) {
      return Invalid(absl::StrCat("sampling.stop[", i, "] has ", stop.size(),
                                  " bytes, more than the limit of ", limits.max_stop_string_bytes));
    }
    if (!IsValidUtf8(stop)) {
      return Invalid(absl::StrCat("sampling.stop[", i, "] must be valid UTF-8"));
    }
  }
  if (static_cast<uint32_t>(sampling.stop_token_ids_size()) > limits.max_stop_token_ids) {
    return Invalid(absl::StrCat("sampling.stop_token_ids has ", sampling.stop_token_ids_size(),
                                " ids, more than the limit of ", limits.max_stop_token_ids));
  }
  for (int i = 0; i < sampling.stop_token_ids_size(); ++i) {
    if (sampling.stop_token_ids(i) >= model.vocab_size()) {
      return Invalid(absl::StrCat("sampling.stop_token_ids[", i, "] must be < vocab_size ",
                                  model.vocab_size(), ", got ", sampling.stop_token_ids(i)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLogprobs(const pkv::v1::SamplingParams& sampling,
                              const RequestLimits& limits) {
  if (sampling.top_logprobs() > limits.max_top_logprobs) {
    return Invalid(absl::StrCat("sampling.top_logprobs must be in [0, ", limits.max_top_logprobs,
                                "], got ", sampling.top_logprobs()));
  }
  if (sampling.top_logprobs() > 0 && !sampling.logprobs()) {
    return Invalid(absl::StrCat("sampling.top_logprobs ", sampling.top_logprobs(),
                                " requires sampling.logprobs = true"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidUtf8(absl::string_view text) { return FirstInvalidUtf8Offset(text) == text.size(); }

absl::Status ValidateRequestId(absl::string_view request_id, const RequestLimits& limits) {
  if (request_id.empty()) {
    if (!limits.require_request_id) return absl::OkStatus();
    return Invalid(absl::StrCat("request_id must be set (1..", limits.max_request_id_bytes,
                                " bytes of [A-Za-z0-9_.:-])"));
  }
  if (request_id.size() > limits.max_request_id_bytes) {
    return Invalid(absl::StrCat("request_id must be at most ", limits.max_request_id_bytes,
                                " bytes, got ", request_id.size()));
  }
  for (size_t i = 0; i < request_id.size(); ++i) {
    const auto c = static_cast<unsigned char>(request_id[i]);
    if (!IsRequestIdByte(c)) {
      return Invalid(absl::StrFormat(
          "request_id may only contain [A-Za-z0-9_.:-], got byte 0x%02x at offset %d", c, i));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSamplingParams(const pkv::v1::SamplingParams& sampling,
                                    const pkv::v1::ModelInfo& model, uint32_t prompt_tokens,
                                    const RequestLimits& limits) {
  const uint32_t max_context = model.max_context();
  if (sampling.max_tokens() < 1) {
    return Invalid(absl::StrCat("sampling.max_tokens must be >= 1, got ", sampling.max_tokens()));
  }
  // A text prompt has at least one token, so max_context - 1 bounds max_tokens before tokenizing.
  // With clamp_max_tokens the worker lowers max_tokens to what the context leaves.
  const uint64_t prompt = prompt_tokens > 0 ? prompt_tokens : 1;
  if (!sampling.clamp_max_tokens() && prompt + sampling.max_tokens() > max_context) {
    return Invalid(absl::StrCat("sampling.max_tokens ", sampling.max_tokens(), " plus ", prompt,
                                prompt_tokens > 0 ? " prompt tokens" : " (minimum) prompt token",
                                " must be <= max_context ", max_context, ", got ",
                                prompt + sampling.max_tokens()));
  }
  if (sampling.has_temperature()) {
    const float t = sampling.temperature();
    if (!std::isfinite(t) || t < 0.0f || t > 2.0f) {
      return Invalid(
          absl::StrCat("sampling.temperature must be a finite number in [0, 2], got ", t));
    }
  }
  if (sampling.has_top_p()) {
    const float p = sampling.top_p();
    if (!(p > 0.0f && p <= 1.0f)) {  // written so NaN fails
      return Invalid(absl::StrCat("sampling.top_p must be in (0, 1], got ", p));
    }
  }
  if (sampling.top_k() > model.vocab_size()) {
    return Invalid(absl::StrCat("sampling.top_k must be in [0, vocab_size ", model.vocab_size(),
                                "], got ", sampling.top_k()));
  }
  const float min_p = sampling.min_p();
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return Invalid(absl::StrCat("sampling.min_p must be in [0, 1], got ", min_p));
  }
  PKV_RETURN_IF_ERROR(ValidateStops(sampling, model, limits));
  return ValidateLogprobs(sampling, limits);
}

absl::Status ValidateGenerateRequest(const pkv::v1::GenerateRequest& request,
                                     const pkv::v1::ModelInfo& model, const RequestLimits& limits) {
  if (model.vocab_size() == 0 || model.max_context() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("model info is incomplete (vocab_size ", model.vocab_size(), ", max_context ",
                     model.max_context(), "); the worker has not reported a usable model"));
  }
  PKV_RETURN_IF_ERROR(ValidateRequestId(request.request_id(), limits));
  PKV_RETURN_IF_ERROR(ValidatePrompt(request, model, limits));
  if (request.session_id().size() > limits.max_session_id_bytes) {
    return Invalid(absl::StrCat("session_id must be at most ", limits.max_session_id_bytes,
                                " bytes, got ", request.session_id().size()));
  }
  const uint32_t prompt_tokens =
      request.has_token_ids() ? static_cast<uint32_t>(request.token_ids().ids_size()) : 0;
  return ValidateSamplingParams(request.sampling(), model, prompt_tokens, limits);
}

}  // namespace pkv::api
