// The GPT-2 byte-level alphabet: a bijection between the 256 byte values and 256 printable Unicode
// characters, so byte-level BPE vocabularies can be stored as text. Bytes that are printable in
// Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to themselves; the other 68 bytes map, in
// increasing byte order, to U+0100, U+0101, ... (space 0x20 becomes U+0120 'Ġ', '\n' U+010A 'Ċ').
// The tables are computed at compile time; all functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pkv::byte_level {

// The code point that stands for byte `b`.
char32_t ByteToChar(uint8_t b);

// The byte that code point `cp` stands for, or -1 when `cp` is not in the alphabet.
int CharToByte(char32_t cp);

// Maps raw bytes to their alphabet characters, as UTF-8 (each byte becomes 1 or 2 UTF-8 bytes).
std::string Encode(std::string_view bytes);

// Maps a UTF-8 string of alphabet characters back to raw bytes. Returns false (and leaves *out in
// an unspecified state) when `text` is not well-formed UTF-8 or holds a character outside the
// alphabet.
bool Decode(std::string_view text, std::string* out);

}  // namespace pkv::byte_level
