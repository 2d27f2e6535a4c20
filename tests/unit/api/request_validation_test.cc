// Table-driven tests of api::ValidateGenerateRequest: every bad field gets INVALID_ARGUMENT with a
// message naming the field and the bound; valid edge cases pass. Plus a randomized UTF-8 property
// test against an independent encoder written here.
#include "api/request_validation.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::api {
namespace {

using pkv::v1::GenerateRequest;

constexpr uint32_t kVocab = 512;
constexpr uint32_t kMaxContext = 512;

pkv::v1::ModelInfo TestModel() {
  pkv::v1::ModelInfo model;
  model.set_model_name("tiny");
  model.set_vocab_size(kVocab);
  model.set_max_context(kMaxContext);
  model.set_page_size(16);
  return model;
}

// A valid request every case starts from: 4 prompt tokens, 16 new tokens.
GenerateRequest BaseRequest() {
  GenerateRequest request;
  request.set_request_id("req-1");
  for (uint32_t id : {1u, 2u, 3u, 4u}) request.mutable_token_ids()->add_ids(id);
  request.mutable_sampling()->set_max_tokens(16);
  return request;
}

struct Case {
  const char* name;
  std::function<void(GenerateRequest&)> mutate;
  absl::StatusCode code;     // kOk for a valid edge case
  const char* message_part;  // substring the message must contain ("" for kOk)
};

void SetTokens(GenerateRequest& r, uint32_t n, uint32_t id = 7) {
  r.mutable_token_ids()->clear_ids();
  for (uint32_t i = 0; i < n; ++i) r.mutable_token_ids()->add_ids(id);
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
constexpr auto kBad = absl::StatusCode::kInvalidArgument;
constexpr auto kOk = absl::StatusCode::kOk;

std::vector<Case> Cases() {
  auto s = [](GenerateRequest& r) { return r.mutable_sampling(); };
  return {
      // --- request_id
      {"request_id_129_bytes", [](auto& r) { r.set_request_id(std::string(129, 'a')); }, kBad,
       "request_id must be at most 128 bytes, got 129"},
      {"request_id_space", [](auto& r) { r.set_request_id("a b"); }, kBad,
       "request_id may only contain [A-Za-z0-9_.:-], got byte 0x20 at offset 1"},
      {"request_id_slash", [](auto& r) { r.set_request_id("x/y"); }, kBad, "byte 0x2f"},
      {"request_id_utf8", [](auto& r) { r.set_request_id("caf\xc3\xa9"); }, kBad, "byte 0xc3"},
      {"request_id_128_bytes_ok", [](auto& r) { r.set_request_id(std::string(128, 'Z')); }, kOk,
       ""},
      {"request_id_all_allowed_chars_ok", [](auto& r) { r.set_request_id("aZ09_.:-"); }, kOk, ""},
      {"request_id_empty_ok_at_router", [](auto& r) { r.clear_request_id(); }, kOk, ""},
      // --- prompt
      {"prompt_missing", [](auto& r) { r.clear_prompt(); }, kBad, "prompt must be set"},
      {"token_ids_empty", [](auto& r) { r.mutable_token_ids()->clear_ids(); }, kBad,
       "token_ids must not be empty"},
      {"token_id_equals_vocab", [](auto& r) { r.mutable_token_ids()->set_ids(2, kVocab); }, kBad,
       "token_ids[2] must be < vocab_size 512, got 512"},
      {"token_id_2pow31_minus_1", [](auto& r) { r.mutable_token_ids()->set_ids(0, 2147483647u); },
       kBad, "got 2147483647"},
      {"token_id_uint32_max", [](auto& r) { r.mutable_token_ids()->add_ids(4294967295u); }, kBad,
       "token_ids[4] must be < vocab_size 512, got 4294967295"},
      {"token_id_vocab_minus_1_ok", [](auto& r) { r.mutable_token_ids()->set_ids(0, kVocab - 1); },
       kOk, ""},
      {"token_id_zero_ok", [](auto& r) { r.mutable_token_ids()->set_ids(0, 0); }, kOk, ""},
      {"prompt_over_max_context", [](auto& r) { SetTokens(r, kMaxContext + 1); }, kBad,
       "more than the limit of 511"},
      {"prompt_equals_max_context", [](auto& r) { SetTokens(r, kMaxContext); }, kBad,
       "token_ids has 512 tokens"},
      {"text_empty", [](auto& r) { r.set_text(""); }, kBad, "text must not be empty"},
      {"text_bad_utf8_lone_continuation", [](auto& r) { r.set_text("ab\x80"); }, kBad,
       "text must be valid UTF-8, got byte 0x80 at offset 2"},
      {"text_overlong_slash", [](auto& r) { r.set_text("\xc0\xaf"); }, kBad, "byte 0xc0"},
      {"text_surrogate", [](auto& r) { r.set_text("x\xed\xa0\x80"); }, kBad, "offset 1"},
      {"text_above_10ffff", [](auto& r) { r.set_text("\xf4\x90\x80\x80"); }, kBad, "byte 0xf4"},
      {"text_truncated_sequence", [](auto& r) { r.set_text("\xe2\x82"); }, kBad, "offset 0"},
      {"text_ok_multibyte",
       [](auto& r) { r.set_text("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"); }, kOk, ""},
      {"text_too_many_bytes", [](auto& r) { r.set_text(std::string((1u << 20) + 1, 'a')); }, kBad,
       "text has 1048577 bytes, more than the limit of 1048576"},
      // --- session_id
      {"session_id_too_long", [](auto& r) { r.set_session_id(std::string(257, 's')); }, kBad,
       "session_id must be at most 256 bytes, got 257"},
      // --- max_tokens and context
      {"max_tokens_zero", [=](auto& r) { s(r)->set_max_tokens(0); }, kBad,
       "sampling.max_tokens must be >= 1, got 0"},
      {"sampling_missing", [](auto& r) { r.clear_sampling(); }, kBad, "sampling.max_tokens"},
      {"prompt_plus_max_tokens_over_context", [=](auto& r) { s(r)->set_max_tokens(509); }, kBad,
       "sampling.max_tokens 509 plus 4 prompt tokens must be <= max_context 512, got 513"},
      {"prompt_plus_max_tokens_exact_fit_ok", [=](auto& r) { s(r)->set_max_tokens(508); }, kOk, ""},
      {"prompt_max_context_minus_1_with_1_token_ok",
       [=](auto& r) {
         SetTokens(r, kMaxContext - 1);
         s(r)->set_max_tokens(1);
       },
       kOk, ""},
      {"max_tokens_uint32_max", [=](auto& r) { s(r)->set_max_tokens(4294967295u); }, kBad,
       "must be <= max_context 512"},
      {"text_prompt_max_tokens_fills_context",
       [=](auto& r) {
         r.set_text("hi");
         s(r)->set_max_tokens(kMaxContext);
       },
       kBad, "max_context 512"},
      {"text_prompt_max_tokens_context_minus_1_ok",
       [=](auto& r) {
         r.set_text("hi");
         s(r)->set_max_tokens(kMaxContext - 1);
       },
       kOk, ""},
      // --- temperature
      {"temperature_negative", [=](auto& r) { s(r)->set_temperature(-1.0f); }, kBad,
       "sampling.temperature must be a finite number in [0, 2], got -1"},
      {"temperature_nan", [=](auto& r) { s(r)->set_temperature(kNaN); }, kBad, "got nan"},
      {"temperature_inf", [=](auto& r) { s(r)->set_temperature(kInf); }, kBad, "got inf"},
      {"temperature_minus_inf", [=](auto& r) { s(r)->set_temperature(-kInf); }, kBad, "got -inf"},
      {"temperature_above_2", [=](auto& r) { s(r)->set_temperature(2.5f); }, kBad, "got 2.5"},
      {"temperature_zero_ok", [=](auto& r) { s(r)->set_temperature(0.0f); }, kOk, ""},
      {"temperature_two_ok", [=](auto& r) { s(r)->set_temperature(2.0f); }, kOk, ""},
      // --- top_p
      {"top_p_zero", [=](auto& r) { s(r)->set_top_p(0.0f); }, kBad,
       "sampling.top_p must be in (0, 1], got 0"},
      {"top_p_negative", [=](auto& r) { s(r)->set_top_p(-0.1f); }, kBad, "got -0.1"},
      {"top_p_above_one", [=](auto& r) { s(r)->set_top_p(1.5f); }, kBad,
       "sampling.top_p must be in (0, 1], got 1.5"},
      {"top_p_nan", [=](auto& r) { s(r)->set_top_p(kNaN); }, kBad, "sampling.top_p"},
      {"top_p_one_ok", [=](auto& r) { s(r)->set_top_p(1.0f); }, kOk, ""},
      {"top_p_tiny_ok", [=](auto& r) { s(r)->set_top_p(1e-6f); }, kOk, ""},
      // --- top_k
      {"top_k_above_vocab", [=](auto& r) { s(r)->set_top_k(kVocab + 1); }, kBad,
       "sampling.top_k must be in [0, vocab_size 512], got 513"},
      {"top_k_vocab_ok", [=](auto& r) { s(r)->set_top_k(kVocab); }, kOk, ""},
      // --- min_p
      {"min_p_above_one", [=](auto& r) { s(r)->set_min_p(1.5f); }, kBad,
       "sampling.min_p must be in [0, 1], got 1.5"},
      {"min_p_negative", [=](auto& r) { s(r)->set_min_p(-0.5f); }, kBad, "got -0.5"},
      {"min_p_nan", [=](auto& r) { s(r)->set_min_p(kNaN); }, kBad, "sampling.min_p"},
      {"min_p_one_ok", [=](auto& r) { s(r)->set_min_p(1.0f); }, kOk, ""},
      // --- stop strings and ids
      {"stop_17_strings",
       [=](auto& r) {
         for (int i = 0; i < 17; ++i) s(r)->add_stop("x");
       },
       kBad, "sampling.stop has 17 strings, more than the limit of 16"},
      {"stop_16_strings_ok",
       [=](auto& r) {
         for (int i = 0; i < 16; ++i) s(r)->add_stop("x");
       },
       kOk, ""},
      {"stop_empty_string",
       [=](auto& r) {
         s(r)->add_stop("a");
         s(r)->add_stop("");
       },
       kBad, "sampling.stop[1] must not be empty"},
      {"stop_257_bytes", [=](auto& r) { s(r)->add_stop(std::string(257, 'q')); }, kBad,
       "sampling.stop[0] has 257 bytes, more than the limit of 256"},
      {"stop_256_bytes_ok", [=](auto& r) { s(r)->add_stop(std::string(256, 'q')); }, kOk, ""},
      {"stop_1mib", [=](auto& r) { s(r)->add_stop(std::string(1 << 20, 'q')); }, kBad,
       "more than the limit of 256"},
      {"stop_bad_utf8", [=](auto& r) { s(r)->add_stop("\xff"); }, kBad,
       "sampling.stop[0] must be valid UTF-8"},
      {"stop_token_id_vocab",
       [=](auto& r) {
         s(r)->add_stop_token_ids(3);
         s(r)->add_stop_token_ids(kVocab);
       },
       kBad, "sampling.stop_token_ids[1] must be < vocab_size 512, got 512"},
      {"stop_token_ids_too_many",
       [=](auto& r) {
         for (int i = 0; i < 129; ++i) s(r)->add_stop_token_ids(1);
       },
       kBad, "sampling.stop_token_ids has 129 ids, more than the limit of 128"},
      // --- logprobs
      {"top_logprobs_21",
       [=](auto& r) {
         s(r)->set_logprobs(true);
         s(r)->set_top_logprobs(21);
       },
       kBad, "sampling.top_logprobs must be in [0, 20], got 21"},
      {"top_logprobs_without_logprobs", [=](auto& r) { s(r)->set_top_logprobs(3); }, kBad,
       "requires sampling.logprobs"},
      {"top_logprobs_20_ok",
       [=](auto& r) {
         s(r)->set_logprobs(true);
         s(r)->set_top_logprobs(20);
       },
       kOk, ""},
      // --- everything set at once, valid
      {"all_fields_ok",
       [=](auto& r) {
         r.set_session_id("conv-9");
         r.set_priority(-3);
         auto* p = s(r);
         p->set_temperature(0.7f);
         p->set_top_k(40);
         p->set_top_p(0.9f);
         p->set_min_p(0.05f);
         p->set_seed(42);
         p->add_stop_token_ids(kVocab - 1);
         p->add_stop("\n\n");
         p->set_ignore_eos(true);
         p->set_logprobs(true);
       },
       kOk, ""},
  };
}

class ValidationTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(ValidationTableTest, CodeAndMessage) {
  const Case& c = GetParam();
  GenerateRequest request = BaseRequest();
  c.mutate(request);
  const absl::Status status = ValidateGenerateRequest(request, TestModel(), RequestLimits{});
  EXPECT_EQ(status.code(), c.code) << status;
  EXPECT_NE(std::string(status.message()).find(c.message_part), std::string::npos)
      << "message: " << status.message() << "\nexpected to contain: " << c.message_part;
}

INSTANTIATE_TEST_SUITE_P(Cases, ValidationTableTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ValidationTest, TableHasAtLeastFortyFailureCases) {
  int failures = 0;
  for (const Case& c : Cases()) failures += c.code != absl::StatusCode::kOk;
  EXPECT_GE(failures, 40);
}

TEST(ValidationTest, WorkerRequiresRequestId) {
  GenerateRequest request = BaseRequest();
  request.clear_request_id();
  RequestLimits limits;
  limits.require_request_id = true;
  const absl::Status status = ValidateGenerateRequest(request, TestModel(), limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("request_id must be set"), std::string::npos);
}

TEST(ValidationTest, ExplicitPromptLimitIsUsed) {
  RequestLimits limits;
  limits.max_prompt_tokens = 8;
  GenerateRequest request = BaseRequest();
  SetTokens(request, 9);
  const absl::Status status = ValidateGenerateRequest(request, TestModel(), limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("more than the limit of 8"), std::string::npos);
  SetTokens(request, 8);
  EXPECT_TRUE(ValidateGenerateRequest(request, TestModel(), limits).ok());
}

TEST(ValidationTest, IncompleteModelInfoIsFailedPrecondition) {
  pkv::v1::ModelInfo model = TestModel();
  model.set_vocab_size(0);
  EXPECT_EQ(ValidateGenerateRequest(BaseRequest(), model, {}).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Random token-id prompts: valid iff every id < vocab and length + max_tokens <= max_context.
TEST(ValidationTest, RandomTokenPromptsMatchTheRule) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 500; ++trial) {
    GenerateRequest request = BaseRequest();
    const uint32_t len = 1 + rng() % 600;
    bool ids_ok = true;
    request.mutable_token_ids()->clear_ids();
    for (uint32_t i = 0; i < len; ++i) {
      const uint32_t id = rng() % (kVocab + kVocab / 64);
      ids_ok &= id < kVocab;
      request.mutable_token_ids()->add_ids(id);
    }
    const uint32_t max_tokens = 1 + rng() % 300;
    request.mutable_sampling()->set_max_tokens(max_tokens);
    const bool expect_ok = ids_ok && len <= kMaxContext - 1 && len + max_tokens <= kMaxContext;
    const absl::Status status = ValidateGenerateRequest(request, TestModel(), {});
    EXPECT_EQ(status.ok(), expect_ok)
        << "len " << len << " max_tokens " << max_tokens << " " << status;
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

// Independent UTF-8 encoder for the property test below.
std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

TEST(Utf8Test, RandomScalarValuesAreValidAndTruncationsAreNot) {
  std::mt19937 rng(777);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = 1 + rng() % 8;
    uint32_t last = 0;
    for (int i = 0; i < n; ++i) {
      do {
        last = rng() % 0x110000;
      } while (last >= 0xD800 && last <= 0xDFFF);
      text += EncodeUtf8(last);
    }
    ASSERT_TRUE(IsValidUtf8(text)) << "code point " << last;
    if (last >= 0x80) {  // dropping the final byte leaves an incomplete sequence
      EXPECT_FALSE(IsValidUtf8(text.substr(0, text.size() - 1))) << "code point " << last;
    }
  }
}

TEST(Utf8Test, SurrogatesAndOverlongsAreInvalid) {
  for (uint32_t cp = 0xD800; cp <= 0xDFFF; cp += 0x7F) EXPECT_FALSE(IsValidUtf8(EncodeUtf8(cp)));
  EXPECT_FALSE(IsValidUtf8("\xc1\xbf"));          // overlong U+007F
  EXPECT_FALSE(IsValidUtf8("\xe0\x9f\xbf"));      // overlong U+07FF
  EXPECT_FALSE(IsValidUtf8("\xf0\x8f\xbf\xbf"));  // overlong U+FFFF
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace pkv::api
