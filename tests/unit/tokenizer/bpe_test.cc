// Byte-level alphabet, the BPE merge loop (hand-made vocabularies and a naive reference), added
// tokens, split regexes and normalization.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/test_util.h"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/pre_tokenizer.h"
#include "worker/tokenizer/regex.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {
namespace {

using testing::MakeTokenizer;
using testing::SpecTokenId;
using testing::TokenizerSpec;

std::vector<int32_t> Ids(const Tokenizer& t, const std::string& text, bool special = false) {
  auto ids = t.Encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(ByteLevelTest, AllBytesRoundTripAndAreDistinct) {
  std::vector<bool> seen(0x200, false);
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_level::ByteToChar(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 0x200u);
    ASSERT_FALSE(seen[cp]) << "two bytes map to U+" << std::hex << static_cast<uint32_t>(cp);
    seen[cp] = true;
    ASSERT_EQ(byte_level::CharToByte(cp), b);
    std::string raw(1, static_cast<char>(b)), back;
    ASSERT_TRUE(byte_level::Decode(byte_level::Encode(raw), &back));
    ASSERT_EQ(back, raw);
  }
  std::string all, back;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  ASSERT_TRUE(byte_level::Decode(byte_level::Encode(all), &back));
  EXPECT_EQ(back, all);
}

TEST(ByteLevelTest, KnownGpt2Characters) {
  // Published GPT-2 facts: printable ASCII is itself, space is 'Ġ' (U+0120), '\n' is 'Ċ' (U+010A),
  // byte 0 is 'Ā' (U+0100), soft hyphen 0xAD is U+0143 (the last of the shifted ones).
  EXPECT_EQ(byte_level::ByteToChar('A'), U'A');
  EXPECT_EQ(byte_level::ByteToChar('~'), U'~');
  EXPECT_EQ(byte_level::ByteToChar(' '), 0x120u);
  EXPECT_EQ(byte_level::ByteToChar('\n'), 0x10Au);
  EXPECT_EQ(byte_level::ByteToChar(0), 0x100u);
  EXPECT_EQ(byte_level::ByteToChar(0xAD), 0x143u);
  EXPECT_EQ(byte_level::ByteToChar(0xE9), 0xE9u);
  EXPECT_EQ(byte_level::Encode("a b"),
            "a\xC4\xA0"
            "b");
  std::string out;
  EXPECT_FALSE(byte_level::Decode("a b", &out));           // raw space is not in the alphabet
  EXPECT_FALSE(byte_level::Decode("\xE4\xB8\xAD", &out));  // U+4E2D is not either
}

TEST(BpeTest, HandMadeMergesFollowRankOrder) {
  TokenizerSpec spec;
  spec.merges = {{"a", "b"}, {"ab", "c"}, {"b", "c"}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  // ab (rank 0) beats bc (rank 2), then ab+c.
  EXPECT_EQ(Ids(*t, "abc"), std::vector<int32_t>{SpecTokenId(spec, "abc")});
  // "bcab": bc? rank 2, ab rank 0 -> "bc" merges only after "ab": [bc, ab].
  EXPECT_EQ(Ids(*t, "bcab"),
            (std::vector<int32_t>{SpecTokenId(spec, "bc"), SpecTokenId(spec, "ab")}));
  // No merge for x: bytes.
  EXPECT_EQ(Ids(*t, "xa"), (std::vector<int32_t>{'x', 'a'}));

  TokenizerSpec reversed;
  reversed.merges = {{"b", "c"}, {"a", "b"}};
  auto r = MakeTokenizer(reversed);
  ASSERT_NE(r, nullptr);
  // bc first; then "a"+"bc" has no merge.
  EXPECT_EQ(Ids(*r, "abc"), (std::vector<int32_t>{'a', SpecTokenId(reversed, "bc")}));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  TokenizerSpec spec;
  spec.merges = {{"a", "a"}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  const int32_t aa = SpecTokenId(spec, "aa");
  EXPECT_EQ(Ids(*t, "aaa"), (std::vector<int32_t>{aa, 'a'}));
  EXPECT_EQ(Ids(*t, "aaaaa"), (std::vector<int32_t>{aa, aa, 'a'}));
}

TEST(BpeTest, StaleCandidatesAreNotMerged) {
  // After b+c, the queued candidate (a,b) at rank 1 is stale; the pair there is now (a,bc), whose
  // merge has rank 3, so z+a (rank 2) must happen first: [za, bc], not [z, abc].
  TokenizerSpec spec;
  spec.merges = {{"b", "c"}, {"a", "b"}, {"z", "a"}, {"a", "bc"}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "zabc"),
            (std::vector<int32_t>{SpecTokenId(spec, "za"), SpecTokenId(spec, "bc")}));
}

TEST(BpeTest, MatchesNaiveBpeOnRandomVocabularies) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    // Random merges over the alphabet {a, b, c, \xC3, \xA9}: each merge joins two existing tokens.
    std::vector<std::string> tokens = {"a", "b", "c", "\xC3", "\xA9"};
    TokenizerSpec spec;
    std::uniform_int_distribution<int> num(1, 30);
    for (int m = num(rng); m > 0; --m) {
      std::uniform_int_distribution<size_t> pick(0, tokens.size() - 1);
      const std::string l = tokens[pick(rng)], r = tokens[pick(rng)];
      spec.merges.emplace_back(l, r);  // duplicates allowed: the last rank wins
      if (std::find(tokens.begin(), tokens.end(), l + r) == tokens.end()) tokens.push_back(l + r);
    }
    spec.pair_merges = trial % 2 == 0;
    auto t = MakeTokenizer(spec);
    ASSERT_NE(t, nullptr);
    for (int w = 0; w < 50; ++w) {
      // Words from units that keep the text well-formed UTF-8 (Encode takes text).
      static const char* const kUnits[] = {"a", "b", "c", "\xC3\xA9"};
      std::string word;
      std::uniform_int_distribution<int> len(1, 40);
      std::uniform_int_distribution<size_t> unit(0, 3);
      for (int n = len(rng); n > 0; --n) word += kUnits[unit(rng)];
      std::vector<int32_t> want;
      for (const std::string& piece : testing::NaiveBpe(word, spec.merges)) {
        want.push_back(SpecTokenId(spec, piece));
      }
      ASSERT_EQ(Ids(*t, word), want) << "trial " << trial << " word " << word;
    }
  }
}

TEST(BpeTest, IgnoreMergesEmitsWholeVocabularyWords) {
  // "abc" is reachable only via a+b then ab+c. With merges a+b only, "abc" is still in the
  // vocabulary when listed after a rank that is never applicable, e.g. b+c then a+bc.
  TokenizerSpec spec;
  spec.merges = {{"a", "b"}, {"b", "c"}, {"a", "bc"}};
  auto plain = MakeTokenizer(spec);
  ASSERT_NE(plain, nullptr);
  // Without ignore_merges: a+b first, then "ab"+"c" has no merge.
  EXPECT_EQ(Ids(*plain, "abc"), (std::vector<int32_t>{SpecTokenId(spec, "ab"), 'c'}));
  spec.ignore_merges = true;
  auto ignoring = MakeTokenizer(spec);
  ASSERT_NE(ignoring, nullptr);
  EXPECT_EQ(Ids(*ignoring, "abc"), std::vector<int32_t>{SpecTokenId(spec, "abc")});
  EXPECT_EQ(Ids(*ignoring, "abcc"), (std::vector<int32_t>{SpecTokenId(spec, "ab"), 'c', 'c'}));
}

TEST(BpeTest, LongWordsAndCacheGiveTheSameAnswer) {
  TokenizerSpec spec;
  spec.merges = {{"a", "b"}, {"ab", "ab"}, {"abab", "abab"}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  std::string word;
  for (int i = 0; i < 10001; ++i) word += "ab";
  const std::vector<int32_t> first = Ids(*t, word);
  EXPECT_EQ(Ids(*t, word), first);
  std::string decoded;
  for (int32_t id : first) decoded += t->TokenBytes(id);
  EXPECT_EQ(decoded, word);
  EXPECT_EQ(first.size(), 10001u / 4 + 1);  // 2500 "abababab" + one "ab"
}

TEST(AddedTokensTest, SplitBeforePreTokenizationLongestFirst) {
  TokenizerSpec spec;
  spec.merges = {{"a", "b"}};
  spec.added = {{300, "<x>"}, {301, "<x><y>", false}, {302, "ab", true}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "q<x><y>r<x>"), (std::vector<int32_t>{'q', 301, 'r', 300}));
  // "ab" is an added token: cut out before BPE even though a merge would also produce it.
  EXPECT_EQ(Ids(*t, "cabc"), (std::vector<int32_t>{'c', 302, 'c'}));
  EXPECT_EQ(Ids(*t, "<x"), (std::vector<int32_t>{'<', 'x'}));
  EXPECT_EQ(Ids(*t, ""), std::vector<int32_t>{});
  EXPECT_TRUE(t->IsSpecial(300));
  EXPECT_FALSE(t->IsSpecial(301));
  EXPECT_EQ(*t->Decode({'q', 301, 300}), "q<x><y><x>");
  EXPECT_EQ(*t->Decode({'q', 301, 300}, /*skip_special_tokens=*/true), "q<x><y>");
  EXPECT_EQ(t->TokenToId("<x><y>"), 301);
  EXPECT_EQ(t->vocab_size(), 303);
  EXPECT_EQ(t->TokenBytes(299), "");  // a hole
  EXPECT_FALSE(t->Decode({303}).ok());
  EXPECT_FALSE(t->Decode({-1}).ok());
}

TEST(AddedTokensTest, LstripAndRstripSwallowWhitespace) {
  TokenizerSpec spec;
  spec.added = {{300, "<m>", true, /*lstrip=*/true, /*rstrip=*/false},
                {301, "<n>", true, /*lstrip=*/false, /*rstrip=*/true}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "a \t<m> b"), (std::vector<int32_t>{'a', 300, ' ', 'b'}));
  EXPECT_EQ(Ids(*t,
                "a <n> \xE3\x80\x80"
                "b"),
            (std::vector<int32_t>{'a', ' ', 301, 'b'}));
}

TEST(AddedTokensTest, NormalizedTokensMatchAfterNormalization) {
  TokenizerSpec spec;
  spec.normalizer = R"({"type":"NFC"})";
  // Content written decomposed; with normalized=true it matches the composed input too.
  spec.added = {{300, "e\xCC\x81", false, false, false, /*normalized=*/true}};
  auto t = MakeTokenizer(spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "x\xC3\xA9y"), (std::vector<int32_t>{'x', 300, 'y'}));
  EXPECT_EQ(Ids(*t, "xe\xCC\x81y"), (std::vector<int32_t>{'x', 300, 'y'}));
}

TEST(NormalizerTest, NfcComposesBeforeBpe) {
  TokenizerSpec nfc;
  nfc.normalizer = R"({"type":"Sequence","normalizers":[{"type":"NFC"}]})";
  auto t = MakeTokenizer(nfc);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "e\xCC\x81"), (std::vector<int32_t>{0xC3, 0xA9}));  // U+00E9
  TokenizerSpec none;
  auto raw = MakeTokenizer(none);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(Ids(*raw, "e\xCC\x81"), (std::vector<int32_t>{'e', 0xCC, 0x81}));
  TokenizerSpec nfkc;
  nfkc.normalizer = R"({"type":"NFKC"})";
  auto k = MakeTokenizer(nfkc);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(Ids(*k, "\xEF\xAC\x81"), (std::vector<int32_t>{'f', 'i'}));  // U+FB01 ligature
}

std::vector<std::string> Words(const std::string& pre_tokenizer_json, const std::string& text) {
  auto json = ParseJson(pre_tokenizer_json);
  EXPECT_TRUE(json.ok()) << json.status();
  if (!json.ok()) return {};
  auto pre = PreTokenizer::FromJson(&*json);
  EXPECT_TRUE(pre.ok()) << pre.status();
  if (!pre.ok()) return {};
  std::vector<std::string> words;
  EXPECT_TRUE(pre->Split(text, /*first_section=*/true, &words).ok());
  return words;
}

constexpr char kLlama3PreTokenizer[] =
    R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":)"
    R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},)"
    R"("behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})";

TEST(PreTokenizerTest, Llama3PatternSplitsLikeOniguruma) {
  // Worked out by hand from the pattern's alternatives (leftmost-first).
  EXPECT_EQ(
      Words(kLlama3PreTokenizer, "I'm 12345  ok\n\nYOU'LL"),
      (std::vector<std::string>{"I", "'m", " ", "123", "45", " ", " ok", "\n\n", "YOU", "'LL"}));
  // U+180E is not White_Space (Oniguruma's \s) though PCRE2's UCP \s matches it: it must behave
  // like punctuation, joining the space before it.
  EXPECT_EQ(Words(kLlama3PreTokenizer,
                  "  \xE1\xA0\x8E"
                  "a"),
            (std::vector<std::string>{" ", " \xE1\xA0\x8E", "a"}));
}

TEST(PreTokenizerTest, ByteLevelGpt2RegexAndPrefixSpace) {
  EXPECT_EQ(Words(R"({"type":"ByteLevel","add_prefix_space":true})", "Hello world's  x"),
            (std::vector<std::string>{" Hello", " world", "'s", " ", " x"}));
  EXPECT_EQ(Words(R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})", "a\tb"),
            (std::vector<std::string>{"a", "\t", "b"}));
}

TEST(PreTokenizerTest, SplitRemovedAndLiteralPatterns) {
  EXPECT_EQ(Words(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":"--"},
                  "behavior":"Removed","invert":false},{"type":"ByteLevel","use_regex":false}]})",
                  "a--b----c"),
            (std::vector<std::string>{"a", "b", "c"}));
  // invert + Removed keeps only the matches; invert + Isolated keeps everything.
  EXPECT_EQ(
      Words(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[a-z]+"},
                  "behavior":"Removed","invert":true},{"type":"ByteLevel","use_regex":false}]})",
            "ab, cd!e"),
      (std::vector<std::string>{"ab", "cd", "e"}));
  EXPECT_EQ(
      Words(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[a-z]+"},
                  "behavior":"Isolated","invert":true},{"type":"ByteLevel","use_regex":false}]})",
            "ab, cd!e"),
      (std::vector<std::string>{"ab", ", ", "cd", "!", "e"}));
}

TEST(RegexTest, TranslationAndEmptyMatches) {
  EXPECT_EQ(*TranslateOnigurumaPattern(R"(\s+\S\\s\u00e9)"),
            R"(\p{White_Space}+\P{White_Space}\\s\x{00e9})");
  EXPECT_FALSE(TranslateOnigurumaPattern(R"(\h)").ok());
  auto re = SplitRegex::Compile("x*");
  ASSERT_TRUE(re.ok());
  std::vector<std::pair<size_t, size_t>> m;
  ASSERT_TRUE((*re)->FindAll("ab\xC3\xA9xx", &m).ok());
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{4, 6}}));
}

}  // namespace
}  // namespace pkv

namespace pkv {
namespace {

// Hugging Face's SplitDelimiterBehavior and Metaspace, worked out by hand from their definitions.
TEST(PreTokenizerTest, MergedSplitBehaviours) {
  const auto split = [](const char* behavior) {
    return absl::StrCat(R"({"type":"Split","pattern":{"String":" "},"invert":false,"behavior":")",
                        behavior, R"("})");
  };
  EXPECT_EQ(Words(split("MergedWithPrevious"), "a  b c"),
            (std::vector<std::string>{"a ", " ", "b ", "c"}));
  EXPECT_EQ(Words(split("MergedWithNext"), "a  b c"),
            (std::vector<std::string>{"a", " ", " b", " c"}));
  EXPECT_EQ(Words(split("Contiguous"), "a  b c"),
            (std::vector<std::string>{"a", "  ", "b", " ", "c"}));
}

TEST(PreTokenizerTest, MetaspacePrependSchemesAndSplit) {
  const auto metaspace = [](const char* scheme, bool split) {
    return absl::StrCat(R"({"type":"Metaspace","replacement":"▁","prepend_scheme":")", scheme,
                        R"(","split":)", split ? "true" : "false", "}");
  };
  EXPECT_EQ(Words(metaspace("always", true), "a  b"), (std::vector<std::string>{"▁a", "▁", "▁b"}));
  EXPECT_EQ(Words(metaspace("never", false), "a  b"), (std::vector<std::string>{"a▁▁b"}));
  EXPECT_EQ(Words(metaspace("first", false), " a"), (std::vector<std::string>{"▁a"}));
  auto json = ParseJson(metaspace("first", false));
  ASSERT_TRUE(json.ok());
  auto pre = PreTokenizer::FromJson(&*json);
  ASSERT_TRUE(pre.ok());
  std::vector<std::string> words;
  ASSERT_TRUE(pre->Split("a", /*first_section=*/false, &words).ok());
  EXPECT_EQ(words, (std::vector<std::string>{"a"}));  // not at the input's start: no "▁"
}

}  // namespace
}  // namespace pkv
