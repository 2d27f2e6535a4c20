#include "common/utf8.h"

namespace pkv::utf8 {
namespace {

enum class Scan { kComplete, kInvalid, kTruncated };

// Looks at the sequence starting at s[pos]. kComplete: `*len` bytes form the character `*cp`.
// kInvalid: the first `*len` bytes are a maximal ill-formed subpart (>= 1 byte). kTruncated: the
// rest of `s` is a valid but incomplete prefix of a character.
Scan ScanAt(std::string_view s, size_t pos, int* len, char32_t* cp) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    *len = 1;
    *cp = b0;
    return Scan::kComplete;
  }
  int need;           // total length of the sequence
  uint8_t lo = 0x80;  // allowed range of the second byte (Table 3-7)
  uint8_t hi = 0xBF;
  char32_t value;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
    value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    value = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    value = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // no overlong 4-byte forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *len = 1;  // stray continuation byte, C0/C1, or F5..FF
    return Scan::kInvalid;
  }
  for (int i = 1; i < need; ++i) {
    if (pos + i >= s.size()) {
      *len = static_cast<int>(s.size() - pos);
      return Scan::kTruncated;
    }
    const auto b = static_cast<uint8_t>(s[pos + i]);
    const bool ok = (i == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *len = i;
      return Scan::kInvalid;
    }
    value = (value << 6) | (b & 0x3F);
  }
  *len = need;
  *cp = value;
  return Scan::kComplete;
}

}  // namespace

int DecodeChar(std::string_view text, size_t pos, char32_t* cp) {
  int len = 0;
  return ScanAt(text, pos, &len, cp) == Scan::kComplete ? len : 0;
}

size_t FirstInvalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    const int len = DecodeChar(text, pos, &cp);
    if (len == 0) return pos;
    pos += static_cast<size_t>(len);
  }
  return pos;
}

bool IsValid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path: most tokenizer input is ASCII.
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp;
    const int len = DecodeChar(text, pos, &cp);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

void AppendChar(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t DecodeLossy(std::string_view bytes, bool final, std::string* out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    int len = 0;
    char32_t cp = 0;
    switch (ScanAt(bytes, pos, &len, &cp)) {
      case Scan::kComplete:
        out->append(bytes.data() + pos, len);
        break;
      case Scan::kInvalid:
        out->append(kReplacementChar);
        break;
      case Scan::kTruncated:
        if (!final) return pos;
        out->append(kReplacementChar);
        break;
    }
    pos += len;
  }
  return pos;
}

}  // namespace pkv::utf8
