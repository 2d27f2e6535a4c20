#include "router/openai/openai_response.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pkv::openai {
namespace {

using json = nlohmann::ordered_json;

// Never throws: invalid UTF-8 (a token that is part of a character) becomes U+FFFD.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json Bytes(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

json Usage(const pkv::v1::Complete& c) {
  json usage = {{"prompt_tokens", c.prompt_tokens()},
                {"completion_tokens", c.completion_tokens()},
                {"total_tokens", c.prompt_tokens() + c.completion_tokens()}};
  if (c.cached_tokens() > 0) {
    usage["prompt_tokens_details"] = {{"cached_tokens", c.cached_tokens()}};
  }
  return usage;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json ChatLogprobs(const google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob>& lps) {
  json content = json::array();
  for (const pkv::v1::TokenLogprob& lp : lps) {
    json top = json::array();
    for (const pkv::v1::TopLogprob& t : lp.top()) {
      top.push_back({{"token", t.token_bytes()},
                     {"logprob", t.logprob()},
                     {"bytes", Bytes(t.token_bytes())}});
    }
    content.push_back({{"token", lp.token_bytes()},
                       {"logprob", lp.logprob()},
                       {"bytes", Bytes(lp.token_bytes())},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// Completions (legacy): parallel lists; text_offset counts bytes from `offset`.
json CompletionLogprobs(const google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob>& lps,
                        size_t offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const pkv::v1::TokenLogprob& lp : lps) {
    tokens.push_back(lp.token_bytes());
    token_logprobs.push_back(lp.logprob());
    json alternatives = json::object();
    for (const pkv::v1::TopLogprob& t : lp.top()) alternatives[t.token_bytes()] = t.logprob();
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += lp.token_bytes().size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json Object(const ResponseHeader& h, bool chunk) {
  const bool chat = h.endpoint == Endpoint::kChatCompletions;
  return {
      {"id", h.id},
      {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
      {"created", h.created},
      {"model", h.model}};
}

json Logprobs(const ResponseHeader& h,
              const google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob>& lps) {
  if (!h.logprobs) return nullptr;
  return h.endpoint == Endpoint::kChatCompletions ? ChatLogprobs(lps) : CompletionLogprobs(lps, 0);
}

json Choice(const ResponseHeader& h, json content, json logprobs, json finish_reason, bool chunk) {
  json choice = {{"index", 0}};
  if (h.endpoint == Endpoint::kChatCompletions) {
    choice[chunk ? "delta" : "message"] = std::move(content);
  } else {
    choice["text"] = std::move(content);
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish_reason);
  return choice;
}

}  // namespace

std::string SseEvent(std::string_view json_text) {
  return absl::StrCat("data: ", absl::string_view(json_text.data(), json_text.size()), "\n\n");
}

std::string ErrorJson(const ApiError& e) {
  const json error = {{"error",
                       {{"message", e.message},
                        {"type", e.type},
                        {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                        {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return Dump(error);
}

std::string_view FinishReasonName(pkv::v1::FinishReason reason) {
  return reason == pkv::v1::FINISH_REASON_LENGTH ? "length" : "stop";
}

std::string StreamChunkJson(const ResponseHeader& h, const pkv::v1::Chunk& chunk, bool first,
                            bool include_usage) {
  json content;
  if (h.endpoint == Endpoint::kChatCompletions) {
    content = json::object();
    if (first) content["role"] = "assistant";
    content["content"] = chunk.text();
  } else {
    content = chunk.text();
  }
  json out = Object(h, /*chunk=*/true);
  out["choices"] = json::array(
      {Choice(h, std::move(content), Logprobs(h, chunk.logprobs()), nullptr, /*chunk=*/true)});
  if (include_usage) out["usage"] = nullptr;
  return Dump(out);
}

std::string StreamFinishJson(const ResponseHeader& h, const pkv::v1::Complete& complete,
                             bool include_usage) {
  json content = h.endpoint == Endpoint::kChatCompletions ? json::object() : json("");
  json out = Object(h, /*chunk=*/true);
  out["choices"] = json::array(
      {Choice(h, std::move(content), nullptr, FinishReasonName(complete.finish_reason()),
              /*chunk=*/true)});
  if (include_usage) out["usage"] = nullptr;
  return Dump(out);
}

std::string StreamUsageJson(const ResponseHeader& h, const pkv::v1::Complete& complete) {
  json out = Object(h, /*chunk=*/true);
  out["choices"] = json::array();
  out["usage"] = Usage(complete);
  return Dump(out);
}

std::string CompletionJson(
    const ResponseHeader& h, const std::string& text,
    const google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob>& logprobs,
    const pkv::v1::Complete& complete) {
  json content = h.endpoint == Endpoint::kChatCompletions
                     ? json{{"role", "assistant"}, {"content", text}}
                     : json(text);
  json out = Object(h, /*chunk=*/false);
  out["choices"] = json::array({Choice(h, std::move(content), Logprobs(h, logprobs),
                                       FinishReasonName(complete.finish_reason()),
                                       /*chunk=*/false)});
  out["usage"] = Usage(complete);
  return Dump(out);
}

std::string ModelListJson(const std::string& model, int64_t created, uint32_t max_context) {
  const json out = {{"object", "list"},
                    {"data", json::array({{{"id", model},
                                           {"object", "model"},
                                           {"created", created},
                                           {"owned_by", "persistentkv"},
                                           {"max_model_len", max_context}}})}};
  return Dump(out);
}

}  // namespace pkv::openai
