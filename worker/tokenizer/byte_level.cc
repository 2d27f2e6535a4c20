#include "worker/tokenizer/byte_level.h"

#include <array>

#include "common/utf8.h"

namespace pkv::byte_level {
namespace {

constexpr bool IsSelfMapped(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> MakeByteToChar() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) table[b] = IsSelfMapped(b) ? static_cast<char32_t>(b) : next++;
  return table;
}

constexpr std::array<char32_t, 256> kByteToChar = MakeByteToChar();

// Every alphabet character is below U+0144 (256 + 68), so the inverse is a small dense table.
constexpr int kMaxChar = 256 + 68;
constexpr std::array<int16_t, kMaxChar> MakeCharToByte() {
  std::array<int16_t, kMaxChar> table{};
  for (auto& v : table) v = -1;
  for (int b = 0; b < 256; ++b) table[kByteToChar[b]] = static_cast<int16_t>(b);
  return table;
}

constexpr std::array<int16_t, kMaxChar> kCharToByte = MakeCharToByte();

}  // namespace

char32_t ByteToChar(uint8_t b) { return kByteToChar[b]; }

int CharToByte(char32_t cp) { return cp < kMaxChar ? kCharToByte[cp] : -1; }

std::string Encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::AppendChar(kByteToChar[static_cast<uint8_t>(c)], &out);
  return out;
}

bool Decode(std::string_view text, std::string* out) {
  out->clear();
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    const int len = utf8::DecodeChar(text, pos, &cp);
    if (len == 0) return false;
    const int b = CharToByte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
    pos += len;
  }
  return true;
}

}  // namespace pkv::byte_level
