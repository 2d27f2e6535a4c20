// Loading tokenizer.json: malformed and unsupported files give clear INVALID_ARGUMENT errors naming
// the problem; random corruption of a valid file never crashes; post-processor and BOS/EOS.
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/test_util.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {
namespace {

using testing::MakeTokenizerJson;
using testing::TokenizerSpec;

// Expects FromJson(json) to fail with INVALID_ARGUMENT whose message contains `needle`.
void ExpectError(const std::string& json, const std::string& needle) {
  auto t = Tokenizer::FromJson(json);
  ASSERT_FALSE(t.ok()) << "accepted a bad file; wanted an error about: " << needle;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(t.status().message(), needle))
      << "message: " << t.status().message() << "\nwanted: " << needle;
}

std::string Valid() {
  TokenizerSpec spec;
  spec.merges = {{"a", "b"}, {"ab", "c"}};
  spec.added = {{300, "<s>"}};
  return MakeTokenizerJson(spec);
}

std::string Replace(const std::string& json, const std::string& from, const std::string& to) {
  EXPECT_TRUE(absl::StrContains(json, from)) << from;
  return absl::StrReplaceAll(json, {{from, to}});
}

TEST(TokenizerJsonTest, ValidBaselineLoads) { EXPECT_TRUE(Tokenizer::FromJson(Valid()).ok()); }

TEST(TokenizerJsonTest, NotJsonOrNotAnObject) {
  ExpectError("{\"model\": ", "malformed JSON");
  ExpectError("[1, 2]", "not a JSON object");
  ExpectError("", "malformed JSON");
}

TEST(TokenizerJsonTest, MissingOrUnknownModel) {
  ExpectError(R"({"version":"1.0"})", "'model' is missing");
  ExpectError(Replace(Valid(), R"("type":"BPE")", R"("type":"Unigram")"),
              "model type 'Unigram' is not supported");
  ExpectError(Replace(Valid(), R"("type":"BPE")", R"("type":"BPE","byte_fallback":true)"),
              "byte_fallback");
  ExpectError(Replace(Valid(), R"("type":"BPE")", R"("type":"BPE","dropout":0.1)"), "dropout");
  ExpectError(Replace(Valid(), R"("type":"BPE")", R"("type":"BPE","end_of_word_suffix":"</w>")"),
              "end_of_word_suffix");
}

TEST(TokenizerJsonTest, BadVocab) {
  ExpectError(Replace(Valid(), R"("vocab":{)", R"("vocab":{"zz":-4,)"), "id must be an integer");
  ExpectError(Replace(Valid(), R"("vocab":{)", R"("vocab":{"zz":1.5,)"), "id must be an integer");
  ExpectError(Replace(Valid(), R"("vocab":{)", R"("vocab":{"zz":99999999999,)"),
              "id must be an integer");
  ExpectError(Replace(Valid(), R"("vocab":{)", R"("vocab":{"zz":3,)"), "id 3 twice");
  // Drop the byte-level token for 'q' (byte 0x71, id 113).
  ExpectError(Replace(Valid(), R"("q":113,)", ""), "lacks the byte-level token for byte 0x71");
  ExpectError(Replace(Valid(), R"("vocab":{)", R"("vocab":7,"x":{)"), "model.vocab must be");
}

TEST(TokenizerJsonTest, BadMerges) {
  ExpectError(Replace(Valid(), R"("a b")", R"("a zz")"), "'zz' is not in the vocab");
  ExpectError(Replace(Valid(), R"("a b")", R"("a c")"),
              "the merged token 'ac' is not in the vocab");
  ExpectError(Replace(Valid(), R"("a b")", R"("a b c")"), "two tokens separated by one space");
  ExpectError(Replace(Valid(), R"("a b")", R"("ab")"), "two tokens separated by one space");
  ExpectError(Replace(Valid(), R"("a b")", R"(["a"])"), "must be a \"left right\" string");
  ExpectError(Replace(Valid(), R"("merges":[)", R"("merges":7,"m2":[)"), "model.merges must be");
}

TEST(TokenizerJsonTest, InvalidRegexAndUnsupportedPipelineParts) {
  const std::string split_json =
      R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(ab"},)"
      R"("behavior":"Isolated","invert":false},{"type":"ByteLevel","use_regex":false}]})";
  TokenizerSpec spec;
  spec.pre_tokenizer = split_json;
  ExpectError(MakeTokenizerJson(spec), "invalid regex '(ab'");
  spec.pre_tokenizer = absl::StrReplaceAll(split_json, {{"(ab", "a\\\\h"}});
  ExpectError(MakeTokenizerJson(spec), "\\h is unsupported");
  spec.pre_tokenizer = absl::StrReplaceAll(split_json, {{"Isolated", "Scattered"}});
  ExpectError(MakeTokenizerJson(spec), "behavior 'Scattered' is not supported");
  spec.pre_tokenizer = R"({"type":"Whitespace"})";
  ExpectError(MakeTokenizerJson(spec), "pre_tokenizer type 'Whitespace' is not supported");
  // Without ByteLevel the pipeline is SentencePiece-style, which a ByteLevel decoder cannot be.
  for (const char* pre : {"null", R"({"type":"Metaspace"})"}) {
    spec.pre_tokenizer = pre;
    ExpectError(MakeTokenizerJson(spec), "decoder type 'ByteLevel' is not supported");
  }
  spec.pre_tokenizer = R"({"type":"Sequence","pretokenizers":[{"type":"ByteLevel"},)"
                       R"({"type":"Split","pattern":{"String":" "},"behavior":"Isolated"}]})";
  ExpectError(MakeTokenizerJson(spec), "nothing may follow the ByteLevel step");

  spec = TokenizerSpec();
  spec.normalizer = R"({"type":"Lowercase"})";
  ExpectError(MakeTokenizerJson(spec), "normalizer type 'Lowercase' is not supported");
  spec = TokenizerSpec();
  spec.post_processor = R"({"type":"RobertaProcessing"})";
  ExpectError(MakeTokenizerJson(spec), "post_processor type 'RobertaProcessing' is not supported");
  ExpectError(
      Replace(Valid(), R"("decoder":{"type":"ByteLevel"})", R"("decoder":{"type":"WordPiece"})"),
      "decoder type 'WordPiece' is not supported");
}

TEST(TokenizerJsonTest, BadAddedTokens) {
  ExpectError(Replace(Valid(), R"("single_word":false)", R"("single_word":true)"), "single_word");
  ExpectError(Replace(Valid(), R"("id":300)", R"("id":-1)"), "added_tokens[0].id out of range");
  ExpectError(Replace(Valid(), R"("content":"<s>")", R"("content":"")"),
              "content must be non-empty");
  ExpectError(Replace(Valid(), R"("added_tokens":[)", R"("added_tokens":[7,)"),
              "must be an object");
}

TEST(TokenizerJsonTest, PostProcessorTemplateAddsBosAndEos) {
  TokenizerSpec spec;
  spec.added = {{300, "<s>"}, {301, "</s>"}};
  spec.post_processor =
      R"({"type":"Sequence","processors":[{"type":"ByteLevel"},{"type":"TemplateProcessing",)"
      R"("single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},)"
      R"({"SpecialToken":{"id":"</s>","type_id":0}}],"pair":[],"special_tokens":{)"
      R"("<s>":{"id":"<s>","ids":[300],"tokens":["<s>"]},"</s>":{"id":"</s>","ids":[301],"tokens":["</s>"]}}}]})";
  auto t = testing::MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(*t->Encode("a", true), (std::vector<int32_t>{300, 'a', 301}));
  EXPECT_EQ(*t->Encode("a", false), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(t->bos_id(), 300);
  EXPECT_EQ(t->eos_id(), 301);

  spec.post_processor =
      absl::StrReplaceAll(spec.post_processor, {{"\"ids\":[301]", "\"idz\":[301]"}});
  ExpectError(MakeTokenizerJson(spec), "special token '</s>' has no entry with 'ids'");
}

TEST(TokenizerJsonTest, EncodeRejectsInvalidUtf8AndFromFileReportsMissingFiles) {
  auto t = Tokenizer::FromJson(Valid());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Encode("ab\xFF").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

// Random byte edits of a valid file: loading must fail cleanly or succeed, and a tokenizer that
// loads must encode and decode random text without crashing. (A libFuzzer target will take over.)
TEST(TokenizerJsonTest, CorruptedFilesNeverCrash) {
  TokenizerSpec spec;
  spec.merges = {{"a", "b"}, {"ab", "c"}, {" ", "a"}};
  spec.added = {{300, "<s>"}, {301, "<t>", false, true, true}};
  spec.normalizer = R"({"type":"NFC"})";
  spec.pre_tokenizer =
      R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\s+|\\p{L}+"},)"
      R"("behavior":"Isolated","invert":false},{"type":"ByteLevel","use_regex":false}]})";
  const std::string base = MakeTokenizerJson(spec);
  ASSERT_TRUE(Tokenizer::FromJson(base).ok());
  std::mt19937 rng(7);
  static const char kBytes[] = "{}[]\",:0123456789-. abtrue\\u\xC3\xA9";
  int loaded = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string json = base;
    std::uniform_int_distribution<int> edits(1, 4);
    for (int e = edits(rng); e > 0; --e) {
      std::uniform_int_distribution<size_t> pos(0, json.size() - 1);
      std::uniform_int_distribution<size_t> byte(0, sizeof(kBytes) - 2);
      const size_t p = pos(rng);
      switch (rng() % 3) {
        case 0:
          json[p] = kBytes[byte(rng)];
          break;
        case 1:
          json.erase(p, 1 + rng() % 8);
          break;
        default:
          json.insert(p, 1, kBytes[byte(rng)]);
      }
    }
    auto t = Tokenizer::FromJson(json);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++loaded;
    const std::string text = testing::RandomText(rng, 30);
    auto ids = (*t)->Encode(text, true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    for (int32_t id : *ids) ASSERT_TRUE(id >= 0 && id < (*t)->vocab_size());
    ASSERT_TRUE((*t)->Decode(*ids).ok());
  }
  EXPECT_GT(loaded, 0);  // some edits are harmless (e.g. inside a string)
}

}  // namespace
}  // namespace pkv
