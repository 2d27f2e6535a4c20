// The OpenAI response JSON (openai_response.h) read back with the project's strict JSON reader
// (common/json.h, RFC 8259, rejects invalid UTF-8): field names and values as OpenAI's clients
// read them, token bytes that are not whole UTF-8; and the gRPC status -> HTTP error mapping.
#include "router/openai/openai_response.h"

#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "router/openai/api_error.h"

namespace pkv::openai {
namespace {

JsonValue Read(const std::string& text) {
  absl::StatusOr<JsonValue> json = ParseJson(text);
  EXPECT_TRUE(json.ok()) << json.status() << "\n" << text;
  EXPECT_TRUE(utf8::IsValid(text));
  return json.ok() ? *std::move(json) : JsonValue();
}

// The member at `path` ("choices.0.delta.content"); fails the test when absent.
const JsonValue& At(const JsonValue& root, const std::string& path) {
  static const JsonValue kMissing;
  const JsonValue* v = &root;
  size_t start = 0;
  while (v != nullptr && start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string key = path.substr(start, dot - start);
    if (v->is_array()) {
      const size_t i = static_cast<size_t>(std::stoul(key));
      v = i < v->items().size() ? &v->items()[i] : nullptr;
    } else {
      v = v->Find(key);
    }
    start = dot + 1;
  }
  if (v == nullptr) {
    ADD_FAILURE() << "no " << path;
    return kMissing;
  }
  return *v;
}
std::string Str(const JsonValue& root, const std::string& path) { return At(root, path).str(); }
int64_t Int(const JsonValue& root, const std::string& path) { return At(root, path).integer(); }

ResponseHeader Header(Endpoint endpoint, bool logprobs = false) {
  ResponseHeader h;
  h.endpoint = endpoint;
  h.id = endpoint == Endpoint::kChatCompletions ? "chatcmpl-abc" : "cmpl-abc";
  h.created = 1700000000;
  h.model = "llama-3.2-1b";
  h.logprobs = logprobs;
  return h;
}

pkv::v1::TokenLogprob Logprob(const std::string& bytes, float logprob,
                              std::vector<std::pair<std::string, float>> top = {}) {
  pkv::v1::TokenLogprob lp;
  lp.set_token_bytes(bytes);
  lp.set_logprob(logprob);
  for (const auto& [b, l] : top) {
    pkv::v1::TopLogprob* t = lp.add_top();
    t->set_token_bytes(b);
    t->set_logprob(l);
  }
  return lp;
}

std::vector<int64_t> Ints(const JsonValue& list) {
  std::vector<int64_t> out;
  for (const JsonValue& v : list.items()) out.push_back(v.integer());
  return out;
}

TEST(OpenAiResponseTest, ErrorJson) {
  const JsonValue e = Read(ErrorJson(BadRequest("'top_p' \"x\" \\ bad\n\t", "top_p")));
  EXPECT_EQ(Str(e, "error.message"), "'top_p' \"x\" \\ bad\n\t");
  EXPECT_EQ(Str(e, "error.type"), "invalid_request_error");
  EXPECT_EQ(Str(e, "error.param"), "top_p");
  EXPECT_TRUE(At(e, "error.code").is_null());
  const JsonValue none = Read(ErrorJson(BadRequest("no param, bad byte \xFF")));
  EXPECT_TRUE(At(none, "error.param").is_null());
  EXPECT_EQ(Str(none, "error.message"), "no param, bad byte \xEF\xBF\xBD");
  ApiError auth = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no key"), 0);
  EXPECT_EQ(Str(Read(ErrorJson(auth)), "error.code"), "invalid_api_key");
}

TEST(OpenAiResponseTest, ChatStreamChunks) {
  const ResponseHeader h = Header(Endpoint::kChatCompletions);
  pkv::v1::Chunk chunk;
  chunk.set_text("Hel");
  const JsonValue first = Read(StreamChunkJson(h, chunk, /*first=*/true, /*include_usage=*/false));
  EXPECT_EQ(Str(first, "id"), "chatcmpl-abc");
  EXPECT_EQ(Str(first, "object"), "chat.completion.chunk");
  EXPECT_EQ(Int(first, "created"), 1700000000);
  EXPECT_EQ(Str(first, "model"), "llama-3.2-1b");
  ASSERT_EQ(At(first, "choices").items().size(), 1u);
  EXPECT_EQ(Int(first, "choices.0.index"), 0);
  EXPECT_EQ(Str(first, "choices.0.delta.role"), "assistant");
  EXPECT_EQ(Str(first, "choices.0.delta.content"), "Hel");
  EXPECT_TRUE(At(first, "choices.0.logprobs").is_null());
  EXPECT_TRUE(At(first, "choices.0.finish_reason").is_null());
  EXPECT_EQ(first.Find("usage"), nullptr);

  chunk.set_text("lo \"w\"\n");
  const JsonValue next = Read(StreamChunkJson(h, chunk, /*first=*/false, /*include_usage=*/true));
  EXPECT_EQ(At(next, "choices.0.delta").Find("role"), nullptr);
  EXPECT_EQ(Str(next, "choices.0.delta.content"), "lo \"w\"\n");
  EXPECT_TRUE(At(next, "usage").is_null());

  pkv::v1::Complete complete;
  complete.set_finish_reason(pkv::v1::FINISH_REASON_EOS);
  complete.set_prompt_tokens(11);
  complete.set_completion_tokens(5);
  const JsonValue finish = Read(StreamFinishJson(h, complete, /*include_usage=*/false));
  EXPECT_EQ(Str(finish, "choices.0.finish_reason"), "stop");
  EXPECT_TRUE(At(finish, "choices.0.delta").is_object());
  EXPECT_TRUE(At(finish, "choices.0.delta").members().empty());
  const JsonValue usage = Read(StreamUsageJson(h, complete));
  EXPECT_TRUE(At(usage, "choices").items().empty());
  EXPECT_EQ(Int(usage, "usage.prompt_tokens"), 11);
  EXPECT_EQ(Int(usage, "usage.completion_tokens"), 5);
  EXPECT_EQ(Int(usage, "usage.total_tokens"), 16);

  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiResponseTest, CompletionStreamChunks) {
  const ResponseHeader h = Header(Endpoint::kCompletions);
  pkv::v1::Chunk chunk;
  chunk.set_text(" there");
  const JsonValue c = Read(StreamChunkJson(h, chunk, /*first=*/true, /*include_usage=*/false));
  EXPECT_EQ(Str(c, "object"), "text_completion");
  EXPECT_EQ(Str(c, "id"), "cmpl-abc");
  EXPECT_EQ(Str(c, "choices.0.text"), " there");
  EXPECT_EQ(At(c, "choices.0").Find("delta"), nullptr);
  pkv::v1::Complete complete;
  complete.set_finish_reason(pkv::v1::FINISH_REASON_LENGTH);
  const JsonValue finish = Read(StreamFinishJson(h, complete, /*include_usage=*/true));
  EXPECT_EQ(Str(finish, "choices.0.text"), "");
  EXPECT_EQ(Str(finish, "choices.0.finish_reason"), "length");
  EXPECT_TRUE(At(finish, "usage").is_null());
}

TEST(OpenAiResponseTest, ChatLogprobsKeepExactBytes) {
  const ResponseHeader h = Header(Endpoint::kChatCompletions, /*logprobs=*/true);
  pkv::v1::Chunk chunk;
  chunk.set_text(" world");
  // "\xE2\x82" is the first two bytes of U+20AC: not text on its own.
  *chunk.add_logprobs() = Logprob(" world", -0.5f, {{" world", -0.5f}, {"\xE2\x82", -1.25f}});
  *chunk.add_logprobs() = Logprob("\xE2\x82", -2.0f);
  const JsonValue j = Read(StreamChunkJson(h, chunk, /*first=*/false, /*include_usage=*/false));
  const JsonValue& content = At(j, "choices.0.logprobs.content");
  ASSERT_EQ(content.items().size(), 2u);
  EXPECT_EQ(Str(content, "0.token"), " world");
  EXPECT_EQ(At(content, "0.logprob").number(), -0.5);
  EXPECT_EQ(Ints(At(content, "0.bytes")), (std::vector<int64_t>{32, 119, 111, 114, 108, 100}));
  ASSERT_EQ(At(content, "0.top_logprobs").items().size(), 2u);
  EXPECT_EQ(At(content, "0.top_logprobs.1.logprob").number(), -1.25);
  EXPECT_EQ(Ints(At(content, "0.top_logprobs.1.bytes")), (std::vector<int64_t>{0xE2, 0x82}));
  // Invalid UTF-8 becomes U+FFFD (one or more) in "token"; "bytes" stays exact.
  for (const std::string path : {"1.token", "0.top_logprobs.1.token"}) {
    const std::string token = Str(content, path);
    ASSERT_FALSE(token.empty()) << path;
    EXPECT_EQ(token.size() % 3, 0u) << path;
    for (size_t i = 0; i + 3 <= token.size(); i += 3) {
      EXPECT_EQ(token.substr(i, 3), utf8::kReplacementChar) << path;
    }
  }
  EXPECT_EQ(Ints(At(content, "1.bytes")), (std::vector<int64_t>{0xE2, 0x82}));
  EXPECT_TRUE(At(content, "1.top_logprobs").items().empty());
}

TEST(OpenAiResponseTest, WholeChatCompletion) {
  const ResponseHeader h = Header(Endpoint::kChatCompletions);
  pkv::v1::Complete complete;
  complete.set_finish_reason(pkv::v1::FINISH_REASON_LENGTH);
  complete.set_prompt_tokens(20);
  complete.set_completion_tokens(3);
  complete.set_cached_tokens(16);
  const google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob> none;
  const JsonValue j = Read(CompletionJson(h, "Hi there!", none, complete));
  EXPECT_EQ(Str(j, "object"), "chat.completion");
  EXPECT_EQ(Str(j, "id"), "chatcmpl-abc");
  EXPECT_EQ(Str(j, "choices.0.message.role"), "assistant");
  EXPECT_EQ(Str(j, "choices.0.message.content"), "Hi there!");
  EXPECT_EQ(Str(j, "choices.0.finish_reason"), "length");
  EXPECT_TRUE(At(j, "choices.0.logprobs").is_null());
  EXPECT_EQ(Int(j, "usage.prompt_tokens"), 20);
  EXPECT_EQ(Int(j, "usage.completion_tokens"), 3);
  EXPECT_EQ(Int(j, "usage.total_tokens"), 23);
  EXPECT_EQ(Int(j, "usage.prompt_tokens_details.cached_tokens"), 16);

  complete.set_cached_tokens(0);
  complete.set_finish_reason(pkv::v1::FINISH_REASON_STOP);
  const JsonValue k = Read(CompletionJson(h, "", none, complete));
  EXPECT_EQ(At(k, "usage").Find("prompt_tokens_details"), nullptr);
  EXPECT_EQ(Str(k, "choices.0.finish_reason"), "stop");
  EXPECT_EQ(FinishReasonName(pkv::v1::FINISH_REASON_EOS), "stop");
}

TEST(OpenAiResponseTest, WholeTextCompletionWithLegacyLogprobs) {
  const ResponseHeader h = Header(Endpoint::kCompletions, /*logprobs=*/true);
  google::protobuf::RepeatedPtrField<pkv::v1::TokenLogprob> lps;
  *lps.Add() = Logprob("Hi", -0.25f, {{"Hi", -0.25f}, {"Hello", -2.5f}});
  *lps.Add() = Logprob(" you", -1.0f, {{" you", -1.0f}});
  pkv::v1::Complete complete;
  complete.set_finish_reason(pkv::v1::FINISH_REASON_EOS);
  complete.set_prompt_tokens(4);
  complete.set_completion_tokens(2);
  const JsonValue j = Read(CompletionJson(h, "Hi you", lps, complete));
  EXPECT_EQ(Str(j, "object"), "text_completion");
  EXPECT_EQ(Str(j, "choices.0.text"), "Hi you");
  EXPECT_EQ(Str(j, "choices.0.finish_reason"), "stop");
  const JsonValue& lp = At(j, "choices.0.logprobs");
  EXPECT_EQ(Str(lp, "tokens.0"), "Hi");
  EXPECT_EQ(Str(lp, "tokens.1"), " you");
  EXPECT_EQ(At(lp, "token_logprobs.0").number(), -0.25);
  EXPECT_EQ(At(lp, "token_logprobs.1").number(), -1.0);
  EXPECT_EQ(At(lp, "top_logprobs.0.Hello").number(), -2.5);
  EXPECT_EQ(At(lp, "top_logprobs.0.Hi").number(), -0.25);
  EXPECT_EQ(At(lp, "top_logprobs.1").members().size(), 1u);
  EXPECT_EQ(Ints(At(lp, "text_offset")), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(Int(j, "usage.total_tokens"), 6);
}

TEST(OpenAiResponseTest, ModelList) {
  const JsonValue j = Read(ModelListJson("llama-3.2-1b", 1700000000, 8192));
  EXPECT_EQ(Str(j, "object"), "list");
  ASSERT_EQ(At(j, "data").items().size(), 1u);
  EXPECT_EQ(Str(j, "data.0.id"), "llama-3.2-1b");
  EXPECT_EQ(Str(j, "data.0.object"), "model");
  EXPECT_EQ(Int(j, "data.0.created"), 1700000000);
  EXPECT_EQ(Int(j, "data.0.max_model_len"), 8192);
}

TEST(ApiErrorTest, GrpcStatusToHttp) {
  struct Row {
    grpc::StatusCode code;
    int http_status;
    std::string type;
  };
  const std::vector<Row> table = {
      {grpc::StatusCode::INVALID_ARGUMENT, 400, "invalid_request_error"},
      {grpc::StatusCode::FAILED_PRECONDITION, 400, "invalid_request_error"},
      {grpc::StatusCode::OUT_OF_RANGE, 400, "invalid_request_error"},
      {grpc::StatusCode::UNAUTHENTICATED, 401, "authentication_error"},
      {grpc::StatusCode::PERMISSION_DENIED, 403, "permission_error"},
      {grpc::StatusCode::NOT_FOUND, 404, "not_found_error"},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, 429, "rate_limit_error"},
      {grpc::StatusCode::CANCELLED, 499, "cancelled"},
      {grpc::StatusCode::UNAVAILABLE, 503, "service_unavailable"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 504, "timeout"},
      {grpc::StatusCode::INTERNAL, 500, "server_error"},
      {grpc::StatusCode::UNKNOWN, 500, "server_error"},
      {grpc::StatusCode::DATA_LOSS, 500, "server_error"},
      {grpc::StatusCode::UNIMPLEMENTED, 500, "server_error"},
  };
  for (const Row& row : table) {
    const ApiError e = FromGrpcStatus(grpc::Status(row.code, "why it failed"), 0);
    EXPECT_EQ(e.http_status, row.http_status) << row.code;
    EXPECT_EQ(e.type, row.type) << row.code;
    EXPECT_EQ(e.message, "why it failed");
    EXPECT_EQ(e.param, "");
    EXPECT_EQ(e.retry_after_s, row.code == grpc::StatusCode::RESOURCE_EXHAUSTED ? 1 : 0);
  }
}

TEST(ApiErrorTest, RetryAfterRoundsThePushbackUp) {
  const grpc::Status full(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  EXPECT_EQ(FromGrpcStatus(full, 1).retry_after_s, 1);
  EXPECT_EQ(FromGrpcStatus(full, 999).retry_after_s, 1);
  EXPECT_EQ(FromGrpcStatus(full, 1000).retry_after_s, 1);
  EXPECT_EQ(FromGrpcStatus(full, 1001).retry_after_s, 2);
  EXPECT_EQ(FromGrpcStatus(full, 2500).retry_after_s, 3);
  EXPECT_EQ(FromGrpcStatus(full, 0).retry_after_s, 1);   // none given: at least 1 s
  EXPECT_EQ(FromGrpcStatus(full, -5).retry_after_s, 1);  // nonsense: at least 1 s
  // The pushback is read from a trailer; the largest int must not overflow the rounding.
  EXPECT_EQ(FromGrpcStatus(full, INT_MAX).retry_after_s, INT_MAX / 1000 + 1);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x"), 5000).retry_after_s,
            0);
}

}  // namespace
}  // namespace pkv::openai
