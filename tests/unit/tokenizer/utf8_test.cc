// utf8.h against ICU's UTF-8 macros and converter (an independent implementation), exhaustively
// over all 1-3 byte strings and on random byte soup.
#include "common/utf8.h"

#include <unicode/utf8.h>

#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/tokenizer/test_util.h"

namespace pkv {
namespace {

// ICU's opinion: is `s` entirely well-formed UTF-8?
bool IcuValid(const std::string& s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto n = static_cast<int32_t>(s.size());
  int32_t i = 0;
  while (i < n) {
    UChar32 c;
    U8_NEXT(p, i, n, c);
    if (c < 0) return false;
  }
  return true;
}

TEST(Utf8Test, IsValidMatchesIcuOnAllStringsUpToThreeBytes) {
  std::string s;
  for (int a = 0; a < 256; ++a) {
    s.assign(1, static_cast<char>(a));
    ASSERT_EQ(utf8::IsValid(s), IcuValid(s)) << a;
    for (int b = 0; b < 256; ++b) {
      s.assign({static_cast<char>(a), static_cast<char>(b)});
      ASSERT_EQ(utf8::IsValid(s), IcuValid(s)) << a << " " << b;
      // Three-byte strings only where the first two bytes can still start a valid sequence, plus
      // a sample of the rest, to keep the test fast.
      if (a < 0xE0 && (a + b) % 7 != 0) continue;
      for (int c = 0; c < 256; ++c) {
        s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        ASSERT_EQ(utf8::IsValid(s), IcuValid(s)) << a << " " << b << " " << c;
      }
    }
  }
}

TEST(Utf8Test, FourByteBoundaries) {
  EXPECT_TRUE(utf8::IsValid("\xF0\x90\x80\x80"));   // U+10000
  EXPECT_TRUE(utf8::IsValid("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(utf8::IsValid("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(utf8::IsValid("\xF0\x8F\xBF\xBF"));  // overlong U+FFFF
  EXPECT_FALSE(utf8::IsValid("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(utf8::IsValid("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(utf8::IsValid("\xF0\x9F\x98"));      // truncated emoji
}

TEST(Utf8Test, AppendCharRoundTripsEveryScalarValue) {
  std::string s;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    s.clear();
    utf8::AppendChar(cp, &s);
    char32_t back = 0;
    ASSERT_EQ(utf8::DecodeChar(s, 0, &back), static_cast<int>(s.size()))
        << static_cast<uint32_t>(cp);
    ASSERT_EQ(back, cp);
    ASSERT_EQ(s.size(), static_cast<size_t>(U8_LENGTH(cp)));
  }
}

// Random bytes biased towards lead/continuation bytes so that near-valid sequences are common.
std::string RandomBytes(std::mt19937& rng, int max_len) {
  static const uint8_t kInteresting[] = {0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                         0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1,
                                         0xF4, 0xF5, 0xFF, 0x20, 0x0A, 0xE4, 0xB8, 0xAD};
  std::uniform_int_distribution<int> len(0, max_len), coin(0, 3), any(0, 255);
  std::uniform_int_distribution<size_t> pick(0, sizeof(kInteresting) - 1);
  std::string s;
  for (int n = len(rng); n > 0; --n) {
    s.push_back(static_cast<char>(coin(rng) == 0 ? any(rng) : kInteresting[pick(rng)]));
  }
  return s;
}

TEST(Utf8Test, DecodeLossyMatchesIcuReplacement) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 20000; ++iter) {
    const std::string bytes = RandomBytes(rng, 24);
    std::string out;
    ASSERT_EQ(utf8::DecodeLossy(bytes, /*final=*/true, &out), bytes.size());
    ASSERT_EQ(out, testing::IcuLossyUtf8(bytes)) << testing::JsonQuote(bytes);
    ASSERT_TRUE(utf8::IsValid(out));
  }
}

TEST(Utf8Test, IncrementalDecodingEqualsWholeDecoding) {
  std::mt19937 rng(99);
  for (int iter = 0; iter < 5000; ++iter) {
    const std::string bytes = RandomBytes(rng, 32);
    std::string pending, out;
    std::uniform_int_distribution<size_t> chunk(0, 5);
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t n = std::min(chunk(rng), bytes.size() - pos);
      pending += bytes.substr(pos, n);
      pos += n;
      const size_t used = utf8::DecodeLossy(pending, /*final=*/false, &out);
      pending.erase(0, used);
      ASSERT_LE(pending.size(), 3u);
    }
    utf8::DecodeLossy(pending, /*final=*/true, &out);
    ASSERT_EQ(out, testing::IcuLossyUtf8(bytes)) << testing::JsonQuote(bytes);
  }
}

TEST(Utf8Test, NonFinalHoldsBackOnlyAValidPrefix) {
  std::string out;
  EXPECT_EQ(utf8::DecodeLossy("a\xE4\xB8", false, &out), 1u);  // first 2 bytes of U+4E2D
  EXPECT_EQ(out, "a");
  out.clear();
  EXPECT_EQ(utf8::DecodeLossy("a\xE4\x41", false, &out), 3u);  // known invalid: replaced now
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "A");
  out.clear();
  EXPECT_EQ(utf8::DecodeLossy("\xED\xA0", false, &out), 2u);  // surrogate prefix: invalid now
  EXPECT_EQ(out, "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace pkv
