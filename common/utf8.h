// UTF-8 helpers shared by the JSON reader, request validation and the tokenizer: strict validation,
// code point decoding, and a lossy incremental decoder for streaming detokenization.
//
// Validity follows RFC 3629 / Unicode 15 Table 3-7: no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF. The lossy decoder replaces each *maximal subpart* of an
// ill-formed sequence with one U+FFFD (Unicode "best practice", also what WHATWG, ICU, Python's
// errors="replace" and Rust's from_utf8_lossy do), so its output does not depend on how the bytes
// were chunked. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pkv::utf8 {

inline constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Decodes the well-formed character starting at text[pos]. Returns its length in bytes (1..4) and
// sets *cp, or returns 0 when the bytes at pos do not start a complete well-formed character.
// REQUIRES: pos < text.size().
int DecodeChar(std::string_view text, size_t pos, char32_t* cp);

// True when `text` is entirely well-formed UTF-8.
bool IsValid(std::string_view text);

// Offset of the first byte that does not start a complete well-formed character, or text.size()
// when the whole text is valid.
size_t FirstInvalid(std::string_view text);

// Appends the UTF-8 encoding of `cp`. REQUIRES: cp <= 0x10FFFF and not a surrogate.
void AppendChar(char32_t cp, std::string* out);

// Lossy decode of `bytes` appended to `out` as well-formed UTF-8. When `final` is false, a trailing
// incomplete-but-so-far-valid sequence is not consumed (it may complete with more bytes). Returns
// the number of bytes consumed; the unconsumed tail is at most 3 bytes.
size_t DecodeLossy(std::string_view bytes, bool final, std::string* out);

}  // namespace pkv::utf8
