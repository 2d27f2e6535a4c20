// TextStream: UTF-8-safe incremental detokenization with stop strings, checked against simple
// oracles (ICU's lossy decoding; a char-by-char stop-string scan) on random inputs.
#include "worker/tokenizer/text_stream.h"

#include <random>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/test_util.h"
#include "worker/tokenizer/tiny_tokenizer.h"

namespace pkv {
namespace {

constexpr char kFffd[] = "\xEF\xBF\xBD";

// Bytes-only vocabulary: token b is the single byte b, so every multi-byte character is split.
std::unique_ptr<Tokenizer> ByteTokenizer() {
  testing::TokenizerSpec spec;
  spec.added = {{300, "<eos>", /*special=*/true}, {301, "<tool>", /*special=*/false}};
  return testing::MakeTokenizer(spec);
}

std::unique_ptr<Tokenizer> TinyTokenizer() {
  auto json = BuildTinyTokenizerJson(1024);
  EXPECT_TRUE(json.ok());
  auto t = Tokenizer::FromJson(*json);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

std::vector<int32_t> BytesAsIds(const std::string& s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

// Feeds all ids, returning each delta; the last element is Flush()'s output.
std::vector<std::string> StreamAll(TextStream& stream, const std::vector<int32_t>& ids) {
  std::vector<std::string> deltas;
  for (int32_t id : ids) deltas.push_back(stream.Push(id).text);
  deltas.push_back(stream.Flush());
  return deltas;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += p;
  return out;
}

TEST(TextStreamTest, MultiByteCharactersAreNeverSplit) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  TextStream stream(t.get(), {});
  // "é" (2 bytes) then "😀" (4 bytes), one byte per token.
  const std::vector<std::string> deltas =
      StreamAll(stream, BytesAsIds("\xC3\xA9\xF0\x9F\x98\x80!"));
  EXPECT_EQ(deltas,
            (std::vector<std::string>{"", "\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80", "!", ""}));
}

TEST(TextStreamTest, InvalidBytesBecomeReplacementOnceKnownInvalid) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  TextStream stream(t.get(), {});
  EXPECT_EQ(stream.Push(0xFF).text, kFffd);  // can never start a character
  EXPECT_EQ(stream.Push(0xE2).text, "");     // could still complete
  EXPECT_EQ(stream.Push(0x82).text, "");
  EXPECT_EQ(stream.Push('a').text, std::string(kFffd) + "a");  // E2 82 41: one maximal subpart
  EXPECT_EQ(stream.Push(0xF0).text, "");
  EXPECT_EQ(stream.Flush(), kFffd);  // dangling partial character
}

TEST(TextStreamTest, RandomBytesMatchIcuLossyDecoding) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> len(0, 40), byte(0, 255), coin(0, 2);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes;
    for (int n = len(rng); n > 0; --n) {
      // Mostly valid UTF-8 chunks, sometimes raw bytes.
      if (coin(rng) == 0) {
        bytes.push_back(static_cast<char>(byte(rng)));
      } else {
        bytes += testing::RandomText(rng, 2);
      }
    }
    TextStream stream(t.get(), {});
    const std::vector<std::string> deltas = StreamAll(stream, BytesAsIds(bytes));
    for (const std::string& d : deltas) ASSERT_TRUE(utf8::IsValid(d));
    ASSERT_EQ(Join(deltas), testing::IcuLossyUtf8(bytes)) << testing::JsonQuote(bytes);
  }
}

TEST(TextStreamTest, StopStringAcrossTokensEmitsOnlyTextBeforeIt) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  TextStream stream(t.get(), {"STOP"});
  EXPECT_EQ(stream.Push('a').text, "a");
  EXPECT_EQ(stream.Push('S').text, "");  // might start "STOP"
  EXPECT_EQ(stream.Push('T').text, "");
  EXPECT_EQ(stream.Push('x').text, "STx");  // diverged: release the held text
  EXPECT_EQ(stream.Push('S').text, "");
  EXPECT_EQ(stream.Push('T').text, "");
  EXPECT_EQ(stream.Push('O').text, "");
  TextStream::Delta d = stream.Push('P');
  EXPECT_EQ(d.text, "");
  EXPECT_TRUE(d.stopped);
  EXPECT_EQ(stream.stop_index(), 0);
  EXPECT_EQ(stream.stop_string(), "STOP");
  d = stream.Push('z');
  EXPECT_TRUE(d.stopped);
  EXPECT_EQ(d.text, "");
  EXPECT_EQ(stream.Flush(), "");
}

// Runs `text` through a stream twice: one byte per token, and as a single token (an added
// token), so that several stop strings can complete within one Push. Both must agree.
std::pair<std::string, int> StopResult(std::vector<std::string> stops, const std::string& text) {
  testing::TokenizerSpec spec;
  spec.added = {{300, text, /*special=*/false}};
  auto t = testing::MakeTokenizer(spec);
  EXPECT_NE(t, nullptr);
  TextStream by_byte(t.get(), stops), whole(t.get(), stops);
  const std::string a = Join(StreamAll(by_byte, BytesAsIds(text)));
  const std::string b = Join(StreamAll(whole, {300}));
  EXPECT_EQ(a, b) << text;
  EXPECT_EQ(by_byte.stop_index(), whole.stop_index()) << text;
  return {b, whole.stop_index()};
}

TEST(TextStreamTest, OverlappingStopStringsFirstToEndWins) {
  // "c" completes before "abcd" does.
  EXPECT_EQ(StopResult({"abcd", "c"}, "xabcd"), std::make_pair(std::string("xab"), 1));
  EXPECT_EQ(StopResult({"c", "abcd"}, "xabcd"), std::make_pair(std::string("xab"), 0));
  // "abc" and "bc" complete together: the one starting first wins.
  EXPECT_EQ(StopResult({"bc", "abc"}, "xabcd"), std::make_pair(std::string("x"), 1));
  // A held-back prefix of one stop string that turns into another.
  EXPECT_EQ(StopResult({"aab", "ab"}, "aaab"), std::make_pair(std::string("a"), 0));
  EXPECT_EQ(StopResult({"", "zz"}, "abc"), std::make_pair(std::string("abc"), -1));
  // A stop string inside a multi-byte character's bytes cannot match across the boundary.
  EXPECT_EQ(StopResult({"\xA9"}, "\xC3\xA9!"), std::make_pair(std::string("\xC3\xA9!"), -1));
}

TEST(TextStreamTest, SpecialTokensAreSkippedUnlessAsked) {
  auto t = ByteTokenizer();
  ASSERT_NE(t, nullptr);
  TextStream skip(t.get(), {});
  EXPECT_EQ(Join(StreamAll(skip, {'h', 'i', 301, 300})), "hi<tool>");
  TextStream keep(t.get(), {}, /*skip_special_tokens=*/false);
  EXPECT_EQ(Join(StreamAll(keep, {'h', 'i', 301, 300})), "hi<tool><eos>");
}

// Reference: the text a char-by-char stream emits: cut before the stop string that ends first
// (ties: starts first). Returns the cut text and the stop index (-1: none).
std::pair<std::string, int> OracleStop(const std::string& text,
                                       const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    int best = -1;
    size_t best_begin = 0;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.empty() || s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best < 0 || end - s.size() < best_begin) {
        best = static_cast<int>(i);
        best_begin = end - s.size();
      }
    }
    if (best >= 0) return {text.substr(0, best_begin), best};
  }
  return {text, -1};
}

TEST(TextStreamTest, RandomStopStringsMatchCharByCharOracle) {
  auto t = TinyTokenizer();
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(11);
  const std::string alphabet[] = {"a", "b", " ", "the", "\n", "\xC3\xA9", "\xE4\xB8\xAD", "!"};
  std::uniform_int_distribution<size_t> pick(0, 7);
  std::uniform_int_distribution<int> len(0, 30), nstops(0, 3), slen(1, 4);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    for (int n = len(rng); n > 0; --n) text += alphabet[pick(rng)];
    std::vector<std::string> stops;
    for (int n = nstops(rng); n > 0; --n) {
      std::string s;
      for (int k = slen(rng); k > 0; --k) s += alphabet[pick(rng)];
      stops.push_back(s);
    }
    auto ids = t->Encode(text);
    ASSERT_TRUE(ids.ok());
    TextStream stream(t.get(), stops);
    std::string emitted;
    const auto [want, want_index] = OracleStop(text, stops);
    for (int32_t id : *ids) {
      emitted += stream.Push(id).text;
      // Nothing past the cut is ever emitted, even transiently.
      ASSERT_EQ(want.compare(0, emitted.size(), emitted), 0) << emitted;
    }
    emitted += stream.Flush();
    ASSERT_EQ(emitted, want) << testing::JsonQuote(text);
    ASSERT_EQ(stream.stop_index(), want_index);
  }
}

TEST(TextStreamTest, PrimeThenContinueEqualsUninterrupted) {
  auto t = TinyTokenizer();
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(3);
  for (int iter = 0; iter < 500; ++iter) {
    std::string text = testing::RandomText(rng, 40);
    auto ids = t->Encode(text);
    ASSERT_TRUE(ids.ok());
    const std::vector<std::string> stops = {"\n\n", "b a", "\xF0\x9F\x98\x80"};
    TextStream whole(t.get(), stops);
    std::vector<std::string> reference;
    for (int32_t id : *ids) reference.push_back(whole.Push(id).text);
    reference.push_back(whole.Flush());

    std::uniform_int_distribution<size_t> cut(0, ids->size());
    const size_t k = cut(rng);
    TextStream resumed(t.get(), stops);
    resumed.Prime(absl::MakeConstSpan(ids->data(), k));
    for (size_t i = k; i < ids->size(); ++i) {
      ASSERT_EQ(resumed.Push((*ids)[i]).text, reference[i])
          << "token " << i << " after prime " << k;
    }
    ASSERT_EQ(resumed.Flush(), reference.back());
    ASSERT_EQ(resumed.stop_index(), whole.stop_index());
  }
}

TEST(TextStreamTest, TokenBoundariesDoNotChangeTheOutput) {
  // The same bytes as one token per byte and as real multi-byte tokens give the same text.
  auto bytes_tok = ByteTokenizer();
  auto tiny = TinyTokenizer();
  ASSERT_NE(bytes_tok, nullptr);
  ASSERT_NE(tiny, nullptr);
  std::mt19937 rng(8);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = testing::RandomText(rng, 50);
    const std::vector<std::string> stops = {"e\xCC\x81", "ab", "\t\n"};
    TextStream a(bytes_tok.get(), stops), b(tiny.get(), stops);
    const std::string by_bytes = Join(StreamAll(a, BytesAsIds(text)));
    const std::string by_tokens = Join(StreamAll(b, *tiny->Encode(text)));
    ASSERT_EQ(by_bytes, by_tokens) << testing::JsonQuote(text);
    ASSERT_EQ(a.stop_index(), b.stop_index());
  }
}

}  // namespace
}  // namespace pkv
