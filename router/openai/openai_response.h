// Writing OpenAI response bodies: chat.completion / text_completion objects, their streamed
// chunks (Server-Sent Events), usage, logprobs, the model list and errors. JSON is written with
// nlohmann::json (Debian's nlohmann-json3-dev); token text that is not whole UTF-8 (a token can be
// part of a character) is written with U+FFFD in its place, its exact bytes going to "bytes".
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pkv/v1/common.pb.h"
#include "router/openai/api_error.h"
#include "router/openai/openai_request.h"

namespace pkv::openai {

// What every object of one response repeats.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
};

// "data: <json>\n\n"
std::string SseEvent(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

std::string ErrorJson(const ApiError& error);

// "stop" for EOS and stop matches, "length" for max_tokens or a full context.
std::string_view FinishReasonName(pkv::v1::FinishReason reason);

// One streamed chunk carrying `chunk`'s text (and logprobs when asked). `first`: the chat delta
// opens with the assistant role. `include_usage`: "usage": null, as OpenAI writes it then.
std::string StreamChunkJson(const ResponseHeader& h, const pkv::v1::Chunk& chunk, bool first,
                            bool include_usage);
// The chunk that carries finish_reason (empty delta / text).
std::string StreamFinishJson(const ResponseHeader& h, const pkv::v1::Complete& complete,
                             bool include_usage);
// The last chunk with stream_options.include_usage: no choices, the usage.
std::string StreamUsageJson(const ResponseHeader& h, const pkv::v1::Complete& complete);

// The whole response of a non-streamed request: `text` and `logprobs` gathered from its chunks.
std::string CompletionJson(
    const ResponseHeader& h, const std::string& text,
    const google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob>& logprobs,
    const pkv::v1::Complete& complete);

std::string ModelListJson(const std::string& model, int64_t created, uint32_t max_context);

}  // namespace pkv::openai
