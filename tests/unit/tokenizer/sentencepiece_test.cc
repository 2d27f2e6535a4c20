// SentencePiece-style BPE (byte_fallback, "▁" normalizers, the Replace/ByteFallback/Fuse/Strip
// decoder) on a small hand-written tokenizer.json in the shape of Llama 2's, and the streaming
// detokenizer on byte-fallback tokens. Agreement with real files is tests/tokenizer/'s job.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/test_util.h"
#include "worker/tokenizer/text_stream.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {
namespace {

// Ids: 0 <unk>, 1 <s>, 2 </s>, 3 + b for "<0xBB>", then 259 "▁", 260 "a", 261 "b", 262 "c",
// 263 "▁a", 264 "ab", 265 "!".
constexpr int32_t kByte0 = 3;
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kSpaceA = 263, kBang = 265;

std::string SpJson(bool byte_fallback, const std::string& normalizer = "") {
  std::string vocab = R"("<unk>":0,"<s>":1,"</s>":2)";
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    absl::StrAppend(&vocab, ",\"", buf, "\":", kByte0 + b);
  }
  absl::StrAppend(&vocab, R"(,"▁":259,"a":260,"b":261,"c":262,"▁a":263,"ab":264,"!":265)");
  const std::string norm =
      normalizer.empty() ? R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},)"
                           R"({"type":"Replace","pattern":{"String":" "},"content":"▁"}]})"
                         : normalizer;
  return absl::StrCat(
      R"({"added_tokens":[{"id":0,"content":"<unk>","special":true},)",
      R"({"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],)",
      R"("normalizer":)", norm, R"(,"pre_tokenizer":null,)",
      R"("post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}},)",
      R"({"Sequence":{"id":"A"}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1]}}},)",
      R"("decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},)",
      R"("content":" "},{"type":"ByteFallback"},{"type":"Fuse"},)",
      R"({"type":"Strip","content":" ","start":1,"stop":0}]},)",
      R"("model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":)",
      byte_fallback ? "true" : "false", R"(,"vocab":{)", vocab, R"(},"merges":["▁ a","a b"]}})");
}

std::unique_ptr<Tokenizer> Sp(bool byte_fallback = true) {
  auto t = Tokenizer::FromJson(SpJson(byte_fallback));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> Encode(const Tokenizer& t, const std::string& text, bool special = false) {
  auto ids = t.Encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(SentencePieceTest, PrependsSpaceMarkPerSectionAndMerges) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->byte_level());
  // "▁ab": the rank-0 merge "▁ a" wins over "a b".
  EXPECT_EQ(Encode(*t, "ab"), (std::vector<int32_t>{kSpaceA, kB}));
  EXPECT_EQ(Encode(*t, "ab", true), (std::vector<int32_t>{1, kSpaceA, kB}));
  // Legacy: the Prepend normalizer runs on each section, also after a special token.
  EXPECT_EQ(Encode(*t, "a</s>b"), (std::vector<int32_t>{kSpaceA, 2, kSpace, kB}));
  EXPECT_EQ(Encode(*t, "  a"), (std::vector<int32_t>{kSpace, kSpace, kSpaceA}));
}

TEST(SentencePieceTest, ByteFallbackAndUnk) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Encode(*t, "\xC3\xA9!"),
            (std::vector<int32_t>{kSpace, kByte0 + 0xC3, kByte0 + 0xA9, kBang}));
  auto no_fallback = Sp(/*byte_fallback=*/false);
  ASSERT_NE(no_fallback, nullptr);
  // Unknown characters become <unk>, consecutive ones fused (fuse_unk).
  EXPECT_EQ(Encode(*no_fallback, "\xC3\xA9\xE4\xB8\xAD!x"),
            (std::vector<int32_t>{kSpace, 0, kBang, 0}));
}

TEST(SentencePieceTest, DecodeReplacesSpaceMarkAssemblesBytesAndStripsOneSpace) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  for (const std::string text : {"ab", " a b  c!", "\xC3\xA9\xF0\x9F\xA6\x80 a", "x"}) {
    auto back = t->Decode(Encode(*t, text));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
  auto with_bos = t->Decode(Encode(*t, "a", true));
  ASSERT_TRUE(with_bos.ok());
  EXPECT_EQ(*with_bos, "<s> a");  // as Hugging Face: the strip only touches the sequence start
  auto skipped = t->Decode(Encode(*t, "a", true), /*skip_special_tokens=*/true);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(*skipped, "a");
}

TEST(SentencePieceTest, StreamEmitsWholeCharactersFromByteTokens) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  // "é🦀": "▁", two byte tokens, four byte tokens.
  const std::vector<int32_t> ids = Encode(*t, "\xC3\xA9\xF0\x9F\xA6\x80");
  ASSERT_EQ(ids.size(), 7u);
  TextStream stream(t.get(), {}, /*skip_special_tokens=*/true, /*strip_sequence_start=*/true);
  std::vector<std::string> deltas;
  for (int32_t id : ids) deltas.push_back(stream.Push(id).text);
  deltas.push_back(stream.Flush());
  EXPECT_EQ(deltas,
            (std::vector<std::string>{"", "", "\xC3\xA9", "", "", "", "\xF0\x9F\xA6\x80", ""}));
}

TEST(SentencePieceTest, ContinuationStreamKeepsTheLeadingSpace) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  // Generated tokens continue a prompt: "▁a" is " a", and the stream says so by default.
  TextStream stream(t.get(), {});
  std::string out;
  for (int32_t id : Encode(*t, "a b")) out += stream.Push(id).text;
  out += stream.Flush();
  EXPECT_EQ(out, " a b");
}

TEST(SentencePieceTest, StopStringSpanningByteTokensIsCaught) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  // "a é🦀 b": the stop string "é🦀" starts in one byte run and ends in the next character's.
  const std::vector<int32_t> ids = Encode(*t, "a \xC3\xA9\xF0\x9F\xA6\x80 b");
  TextStream stream(t.get(), {"\xC3\xA9\xF0\x9F\xA6\x80"}, true, /*strip_sequence_start=*/true);
  std::string out;
  size_t pushed = 0;
  for (int32_t id : ids) {
    ++pushed;
    TextStream::Delta d = stream.Push(id);
    out += d.text;
    if (d.stopped) break;
  }
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(out, "a ");
  EXPECT_LT(pushed, ids.size());  // stopped at the last byte token of the crab
}

TEST(SentencePieceTest, RandomTextStreamsBackExactly) {
  auto t = Sp();
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(17);
  for (int iter = 0; iter < 300; ++iter) {
    std::string text = testing::RandomText(rng, 24);
    for (char& c : text) c = c == '<' ? 'a' : c;  // no added tokens: they are not round-trip
    const std::vector<int32_t> ids = Encode(*t, text);
    TextStream stream(t.get(), {}, true, /*strip_sequence_start=*/true);
    std::string out;
    for (int32_t id : ids) {
      const std::string delta = stream.Push(id).text;
      ASSERT_TRUE(utf8::IsValid(delta));
      out += delta;
    }
    out += stream.Flush();
    auto decoded = t->Decode(ids);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(out, *decoded);
    EXPECT_EQ(out, text) << "iteration " << iter;
  }
}

TEST(SentencePieceTest, TokenizerModelOnlyIsRefusedNamingTokenizerJson) {
  const std::string dir = ::testing::TempDir() + "/sp_model_only";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.model") << "not read";
  auto t = Tokenizer::FromModelDir(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(SentencePieceTest, ConfigRebuildsBosEosTemplate) {
  TokenizerConfig config;
  config.tokenizer_class = "LlamaTokenizer";
  config.add_eos_token = true;
  config.bos_token = "<s>";
  config.eos_token = "</s>";
  auto t = Tokenizer::FromJson(SpJson(true), &config);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Encode(**t, "a", true), (std::vector<int32_t>{1, kSpaceA, 2}));
  config.add_bos_token = false;
  t = Tokenizer::FromJson(SpJson(true), &config);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Encode(**t, "a", true), (std::vector<int32_t>{kSpaceA, 2}));
  auto parsed = ParseTokenizerConfig(
      R"({"tokenizer_class":"GemmaTokenizerFast","bos_token":{"content":"<s>"},"legacy":false})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tokenizer_class, "GemmaTokenizer");
  EXPECT_EQ(parsed->bos_token, "<s>");
  EXPECT_TRUE(parsed->RebuildsTemplate());
}

TEST(SentencePieceTest, RejectsByteFallbackInByteLevelPipelines) {
  std::string json = SpJson(true);
  const std::string from = R"("pre_tokenizer":null)";
  json.replace(json.find(from), from.size(), R"("pre_tokenizer":{"type":"ByteLevel"})");
  auto t = Tokenizer::FromJson(json);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("byte_fallback"), std::string::npos);
}

}  // namespace
}  // namespace pkv
