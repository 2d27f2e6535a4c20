// Reading OpenAI request bodies (POST /v1/chat/completions, /v1/completions) into a
// pkv.v1.GenerateRequest, with errors that name the field.
//
// The body is untrusted: it is parsed by the project's fuzzed JSON reader (common/json.h: depth
// limited, never throws), its size is bounded by the HTTP server before it gets here, and every
// field's type and range is checked here; what the worker checks against the model (vocabulary,
// context length) is left to the shared validation (api/request_validation.h) downstream.
//
// Supported fields: model, messages (system/user/assistant/tool/developer; content a string, null,
// or a list of {"type": "text"} parts, joined with "\n"), prompt (a string, a list of token ids,
// or a list holding one of these), max_tokens / max_completion_tokens, temperature, top_p, top_k,
// min_p, seed, stop (string or list), logprobs / top_logprobs (chat: bool + 0..20; completions:
// an int 0..20), n (1 only), stream, stream_options.include_usage, user (also the session key for
// affinity), ignore_eos. Fields that would change the output and are not implemented (tools,
// logit_bias, a non-text response_format, non-zero penalties, n > 1, echo, best_of > 1, suffix) are
// refused with a 400 naming them rather than ignored; other unknown fields are ignored, as OpenAI's
// clients send many.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "pkv/v1/generation.pb.h"
#include "router/openai/api_error.h"

namespace pkv::openai {

enum class Endpoint { kChatCompletions, kCompletions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;                 // as sent ("" when absent: the served model)
  pkv::v1::GenerateRequest request;  // prompt or chat, sampling, session_id; no request_id
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
};

// `max_context` bounds the default max_tokens (the request then asks the worker to clamp it to the
// room its prompt leaves).
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(Endpoint endpoint,
                                                                 std::string_view body,
                                                                 uint32_t max_context);

}  // namespace pkv::openai
