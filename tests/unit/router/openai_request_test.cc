// ParseCompletionRequest: every supported OpenAI field of /v1/chat/completions and /v1/completions
// mapped onto pkv.v1.GenerateRequest, and every refusal naming its field (param).
#include "router/openai/openai_request.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pkv::openai {
namespace {

constexpr uint32_t kContext = 4096;

std::string ChatBody(const std::string& extra) {
  return absl::StrCat(R"({"messages": [{"role": "user", "content": "hi"}])", extra, "}");
}
std::string CompletionBody(const std::string& extra) {
  return absl::StrCat(R"({"prompt": "Once upon a time")", extra, "}");
}

CompletionRequest Parse(Endpoint endpoint, const std::string& body, uint32_t context = kContext) {
  std::variant<CompletionRequest, ApiError> r = ParseCompletionRequest(endpoint, body, context);
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "refused " << body << ": " << e->message << " (param " << e->param << ")";
    return {};
  }
  return std::get<CompletionRequest>(std::move(r));
}
CompletionRequest Chat(const std::string& extra) {
  return Parse(Endpoint::kChatCompletions, ChatBody(extra));
}
CompletionRequest Completion(const std::string& extra) {
  return Parse(Endpoint::kCompletions, CompletionBody(extra));
}

ApiError Refuse(Endpoint endpoint, const std::string& body) {
  std::variant<CompletionRequest, ApiError> r = ParseCompletionRequest(endpoint, body, kContext);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "accepted " << body;
    return {};
  }
  return std::get<ApiError>(std::move(r));
}

TEST(OpenAiRequestTest, ChatMessagesWithEveryContentShape) {
  const CompletionRequest r = Parse(Endpoint::kChatCompletions, R"({
      "model": "llama-3",
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "first"},
                                     {"type": "text", "text": "second"}]},
        {"role": "assistant", "content": null},
        {"role": "tool", "content": []},
        {"role": "developer", "content": "caf\u00e9 \ud83d\ude00"}]})");
  EXPECT_EQ(r.endpoint, Endpoint::kChatCompletions);
  EXPECT_EQ(r.model, "llama-3");
  ASSERT_TRUE(r.request.has_chat());
  const pkv::v1::ChatPrompt& chat = r.request.chat();
  EXPECT_TRUE(chat.add_generation_prompt());
  ASSERT_EQ(chat.messages_size(), 5);
  EXPECT_EQ(chat.messages(0).role(), "system");
  EXPECT_EQ(chat.messages(0).content(), "Be brief.");
  EXPECT_EQ(chat.messages(1).role(), "user");
  EXPECT_EQ(chat.messages(1).content(), "first\nsecond");
  EXPECT_EQ(chat.messages(2).role(), "assistant");
  EXPECT_EQ(chat.messages(2).content(), "");
  EXPECT_EQ(chat.messages(3).content(), "");
  EXPECT_EQ(chat.messages(4).role(), "developer");
  EXPECT_EQ(chat.messages(4).content(), "caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_TRUE(r.request.request_id().empty());
}

TEST(OpenAiRequestTest, CompletionPromptShapes) {
  CompletionRequest r = Completion("");
  EXPECT_EQ(r.endpoint, Endpoint::kCompletions);
  ASSERT_TRUE(r.request.has_text() || r.request.prompt_case() == pkv::v1::GenerateRequest::kText);
  EXPECT_EQ(r.request.text(), "Once upon a time");
  EXPECT_EQ(r.model, "");

  r = Parse(Endpoint::kCompletions, R"({"prompt": [1, 2, 4294967295]})");
  ASSERT_EQ(r.request.prompt_case(), pkv::v1::GenerateRequest::kTokenIds);
  EXPECT_EQ(
      std::vector<uint32_t>(r.request.token_ids().ids().begin(), r.request.token_ids().ids().end()),
      (std::vector<uint32_t>{1, 2, 4294967295u}));

  r = Parse(Endpoint::kCompletions, R"({"prompt": ["a batch of one"]})");
  ASSERT_EQ(r.request.prompt_case(), pkv::v1::GenerateRequest::kText);
  EXPECT_EQ(r.request.text(), "a batch of one");

  r = Parse(Endpoint::kCompletions, R"({"prompt": [[7, 8]]})");
  ASSERT_EQ(r.request.prompt_case(), pkv::v1::GenerateRequest::kTokenIds);
  EXPECT_EQ(r.request.token_ids().ids_size(), 2);
  EXPECT_EQ(r.request.token_ids().ids(1), 8u);

  r = Parse(Endpoint::kCompletions, R"({"prompt": ""})");
  EXPECT_EQ(r.request.prompt_case(), pkv::v1::GenerateRequest::kText);
}

TEST(OpenAiRequestTest, MaxTokens) {
  EXPECT_EQ(Chat(R"(, "max_tokens": 7)").request.sampling().max_tokens(), 7u);
  EXPECT_FALSE(Chat(R"(, "max_tokens": 7)").request.sampling().clamp_max_tokens());
  // max_completion_tokens (the newer name) wins over the deprecated max_tokens.
  const CompletionRequest both = Chat(R"(, "max_tokens": 7, "max_completion_tokens": 9)");
  EXPECT_EQ(both.request.sampling().max_tokens(), 9u);
  EXPECT_EQ(Chat(R"(, "max_completion_tokens": 3)").request.sampling().max_tokens(), 3u);
  EXPECT_EQ(Completion(R"(, "max_tokens": 4294967295)").request.sampling().max_tokens(),
            4294967295u);
  // Without one: up to the end of the context, clamped by the worker to what the prompt leaves.
  const CompletionRequest dflt = Chat("");
  EXPECT_EQ(dflt.request.sampling().max_tokens(), kContext - 1);
  EXPECT_TRUE(dflt.request.sampling().clamp_max_tokens());
  const CompletionRequest null_max = Chat(R"(, "max_tokens": null)");
  EXPECT_TRUE(null_max.request.sampling().clamp_max_tokens());
  const CompletionRequest tiny = Parse(Endpoint::kCompletions, CompletionBody(""), 1);
  EXPECT_EQ(tiny.request.sampling().max_tokens(), 1u);
}

TEST(OpenAiRequestTest, SamplingFields) {
  const CompletionRequest r = Chat(
      R"(, "temperature": 0.5, "top_p": 0.25, "top_k": 40, "min_p": 0.125, "seed": 42,
           "ignore_eos": true, "presence_penalty": 0, "frequency_penalty": 0.0,
           "repetition_penalty": 1, "n": 1, "best_of": 1, "response_format": {"type": "text"},
           "tools": [], "logit_bias": {}, "echo": false, "suffix": "",
           "metadata": {"unknown": ["fields", "are", "ignored"]})");
  const pkv::v1::SamplingParams& s = r.request.sampling();
  ASSERT_TRUE(s.has_temperature());
  EXPECT_EQ(s.temperature(), 0.5f);
  ASSERT_TRUE(s.has_top_p());
  EXPECT_EQ(s.top_p(), 0.25f);
  EXPECT_EQ(s.top_k(), 40u);
  EXPECT_EQ(s.min_p(), 0.125f);
  ASSERT_TRUE(s.has_seed());
  EXPECT_EQ(s.seed(), 42u);
  EXPECT_TRUE(s.ignore_eos());

  const pkv::v1::SamplingParams unset = Chat("").request.sampling();
  EXPECT_FALSE(unset.has_temperature());
  EXPECT_FALSE(unset.has_top_p());
  EXPECT_FALSE(unset.has_seed());
  EXPECT_EQ(unset.top_k(), 0u);
  EXPECT_FALSE(unset.ignore_eos());

  EXPECT_EQ(Chat(R"(, "top_k": -1)").request.sampling().top_k(), 0u);  // -1: off (vLLM)
  EXPECT_EQ(Chat(R"(, "temperature": 0)").request.sampling().temperature(), 0.0f);
  EXPECT_EQ(Chat(R"(, "temperature": 2)").request.sampling().temperature(), 2.0f);
  // A negative seed keeps its 64 bits (two's complement), so equal seeds stay equal.
  EXPECT_EQ(Chat(R"(, "seed": -1)").request.sampling().seed(), UINT64_MAX);
  EXPECT_EQ(Chat(R"(, "seed": -9223372036854775808)").request.sampling().seed(), uint64_t{1} << 63);
}

TEST(OpenAiRequestTest, Stop) {
  const CompletionRequest one = Completion(R"(, "stop": "\n\n")");
  ASSERT_EQ(one.request.sampling().stop_size(), 1);
  EXPECT_EQ(one.request.sampling().stop(0), "\n\n");
  const CompletionRequest list = Chat(R"(, "stop": ["END", "", "###"])");
  ASSERT_EQ(list.request.sampling().stop_size(), 2);  // empty strings dropped
  EXPECT_EQ(list.request.sampling().stop(0), "END");
  EXPECT_EQ(list.request.sampling().stop(1), "###");
  EXPECT_EQ(Chat(R"(, "stop": "")").request.sampling().stop_size(), 0);
  EXPECT_EQ(Chat(R"(, "stop": null)").request.sampling().stop_size(), 0);
}

TEST(OpenAiRequestTest, Logprobs) {
  CompletionRequest r = Chat(R"(, "logprobs": true, "top_logprobs": 5)");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_TRUE(r.request.sampling().logprobs());
  EXPECT_EQ(r.request.sampling().top_logprobs(), 5u);

  r = Chat(R"(, "logprobs": true)");
  EXPECT_TRUE(r.request.sampling().logprobs());
  EXPECT_EQ(r.request.sampling().top_logprobs(), 0u);
  r = Chat(R"(, "logprobs": false, "top_logprobs": 0)");
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.request.sampling().logprobs());
  r = Chat("");
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.request.sampling().logprobs());

  // Completions: an integer, the number of alternatives; 0 still asks for the sampled token's.
  r = Completion(R"(, "logprobs": 3)");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.request.sampling().top_logprobs(), 3u);
  r = Completion(R"(, "logprobs": 0)");
  EXPECT_TRUE(r.request.sampling().logprobs());
  EXPECT_EQ(r.request.sampling().top_logprobs(), 0u);
  r = Completion(R"(, "logprobs": null)");
  EXPECT_FALSE(r.request.sampling().logprobs());
}

TEST(OpenAiRequestTest, StreamingAndUser) {
  CompletionRequest r = Chat(R"(, "stream": true, "stream_options": {"include_usage": true})");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  r = Chat(R"(, "stream": true)");
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
  r = Completion(R"(, "stream": false)");
  EXPECT_FALSE(r.stream);
  r = Chat(R"(, "stream": false, "stream_options": null)");
  EXPECT_FALSE(r.include_usage);

  EXPECT_EQ(Chat(R"(, "user": "alice-42")").request.session_id(), "alice-42");
  EXPECT_EQ(Chat("").request.session_id(), "");
  const std::string long_user(300, 'u');  // too long to be a session key: not used as one
  EXPECT_EQ(Chat(absl::StrCat(R"(, "user": ")", long_user, "\"")).request.session_id(), "");
}

struct Refusal {
  Endpoint endpoint;
  std::string body;
  std::string param;  // "" : none named (the body as a whole)
};

TEST(OpenAiRequestTest, RefusalsNameTheirField) {
  const Endpoint kChat = Endpoint::kChatCompletions, kText = Endpoint::kCompletions;
  const std::vector<Refusal> cases = {
      {kChat, ChatBody(R"(, "model": 5)"), "model"},
      {kChat, ChatBody(R"(, "temperature": "hot")"), "temperature"},
      {kChat, ChatBody(R"(, "temperature": 2.5)"), "temperature"},
      {kChat, ChatBody(R"(, "temperature": -0.1)"), "temperature"},
      {kChat, ChatBody(R"(, "temperature": 1e400)"), "temperature"},
      {kChat, ChatBody(R"(, "top_p": 0)"), "top_p"},
      {kChat, ChatBody(R"(, "top_p": 1.5)"), "top_p"},
      {kChat, ChatBody(R"(, "top_p": true)"), "top_p"},
      {kChat, ChatBody(R"(, "top_k": -2)"), "top_k"},
      {kChat, ChatBody(R"(, "top_k": 1.5)"), "top_k"},
      {kChat, ChatBody(R"(, "min_p": 1.01)"), "min_p"},
      {kChat, ChatBody(R"(, "seed": "42")"), "seed"},
      {kChat, ChatBody(R"(, "seed": 1.5)"), "seed"},
      {kChat, ChatBody(R"(, "max_tokens": 0)"), "max_tokens"},
      {kChat, ChatBody(R"(, "max_tokens": "10")"), "max_tokens"},
      {kChat, ChatBody(R"(, "max_tokens": 4294967296)"), "max_tokens"},
      {kChat, ChatBody(R"(, "max_completion_tokens": -1)"), "max_completion_tokens"},
      {kChat, ChatBody(R"(, "n": 2)"), "n"},
      {kChat, ChatBody(R"(, "n": 0)"), "n"},
      {kText, CompletionBody(R"(, "best_of": 3)"), "best_of"},
      {kText, CompletionBody(R"(, "echo": true)"), "echo"},
      {kText, CompletionBody(R"(, "suffix": "end")"), "suffix"},
      {kChat, ChatBody(R"(, "tools": [{"type": "function", "function": {"name": "f"}}])"), "tools"},
      {kChat, ChatBody(R"(, "functions": [{"name": "f"}])"), "functions"},
      {kChat, ChatBody(R"(, "logit_bias": {"50256": -100})"), "logit_bias"},
      {kChat, ChatBody(R"(, "response_format": {"type": "json_object"})"), "response_format"},
      {kChat, ChatBody(R"(, "response_format": "text")"), "response_format"},
      {kChat, ChatBody(R"(, "presence_penalty": 0.5)"), "presence_penalty"},
      {kChat, ChatBody(R"(, "frequency_penalty": -1)"), "frequency_penalty"},
      {kText, CompletionBody(R"(, "repetition_penalty": 1.1)"), "repetition_penalty"},
      {kChat, ChatBody(R"(, "stop": 5)"), "stop"},
      {kChat, ChatBody(R"(, "stop": ["a", 1])"), "stop"},
      {kChat, ChatBody(R"(, "logprobs": 1)"), "logprobs"},
      {kChat, ChatBody(R"(, "top_logprobs": 3)"), "top_logprobs"},
      {kChat, ChatBody(R"(, "logprobs": false, "top_logprobs": 3)"), "top_logprobs"},
      {kChat, ChatBody(R"(, "logprobs": true, "top_logprobs": 21)"), "top_logprobs"},
      {kText, CompletionBody(R"(, "logprobs": true)"), "logprobs"},
      {kText, CompletionBody(R"(, "logprobs": 21)"), "logprobs"},
      {kChat, ChatBody(R"(, "stream": "yes")"), "stream"},
      {kChat, ChatBody(R"(, "stream_options": {"include_usage": true})"), "stream_options"},
      {kChat, ChatBody(R"(, "stream": false, "stream_options": {})"), "stream_options"},
      {kChat, ChatBody(R"(, "stream": true, "stream_options": [])"), "stream_options"},
      {kChat, ChatBody(R"(, "stream": true, "stream_options": {"include_usage": 1})"),
       "include_usage"},
      {kChat, ChatBody(R"(, "user": 7)"), "user"},
      {kChat, ChatBody(R"(, "ignore_eos": "true")"), "ignore_eos"},
      {kChat, R"({})", "messages"},
      {kChat, R"({"messages": []})", "messages"},
      {kChat, R"({"messages": {"role": "user"}})", "messages"},
      {kChat, R"({"messages": [{"content": "no role"}]})", "messages[0].role"},
      {kChat, R"({"messages": ["hi"]})", "messages[0].role"},
      {kChat, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {kChat,
       R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [
           {"type": "text", "text": "look"},
           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})",
       "messages[1].content"},
      {kChat, R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content"},
      {kText, R"({"model": "m"})", "prompt"},
      {kText, R"({"prompt": 5})", "prompt"},
      {kText, R"({"prompt": []})", "prompt"},
      {kText, R"({"prompt": [-1, 2]})", "prompt"},
      {kText, R"({"prompt": [1, 4294967296]})", "prompt"},
      {kText, R"({"prompt": [1.5]})", "prompt"},
      {kText, R"({"prompt": ["two", "prompts"]})", "prompt"},
      {kText, R"({"prompt": [[1], [2]]})", "prompt"},
      {kText, R"({"prompt": [{"text": "x"}]})", "prompt"},
  };
  for (const Refusal& c : cases) {
    const ApiError e = Refuse(c.endpoint, c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty()) << c.body;
    EXPECT_EQ(e.retry_after_s, 0);
  }
}

TEST(OpenAiRequestTest, RefusesBodiesThatAreNotOneJsonObject) {
  for (const std::string& body :
       {std::string(R"({"messages": [{"role": "user", "content": "caf)") + "\xC3" + "\"}]}",
        std::string("{\"model\": \"\xFF\"}"), std::string(R"([{"role": "user"}])"),
        std::string(R"("a string")"), std::string("null"), std::string("42"), std::string(""),
        std::string(R"({"messages": [})"), std::string(R"({"a": 1} trailing)"),
        std::string(R"({"messages": [{"role": "user", "content": "\ud800"}]})")}) {
    for (Endpoint endpoint : {Endpoint::kChatCompletions, Endpoint::kCompletions}) {
      const ApiError e = Refuse(endpoint, body);
      EXPECT_EQ(e.http_status, 400) << body;
      EXPECT_EQ(e.param, "") << body;
      EXPECT_FALSE(e.message.empty());
    }
  }
  const ApiError utf8 = Refuse(Endpoint::kChatCompletions, std::string("{\"model\": \"\xFF\"}"));
  EXPECT_NE(utf8.message.find("UTF-8"), std::string::npos) << utf8.message;
}

TEST(OpenAiRequestTest, DeepNestingIsRefusedNotACrash) {
  const auto nested = [](int depth) {
    return ChatBody(
        absl::StrCat(R"(, "metadata": )", std::string(depth, '['), std::string(depth, ']')));
  };
  EXPECT_EQ(Parse(Endpoint::kChatCompletions, nested(100)).request.chat().messages_size(), 1);
  for (int depth : {1000, 100000}) {
    const ApiError e = Refuse(Endpoint::kChatCompletions, nested(depth));
    EXPECT_EQ(e.http_status, 400) << depth;
    EXPECT_NE(e.message.find("JSON"), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace pkv::openai
