// Python str operations on UTF-8 text, by code point as Python counts: length, indexing and
// slicing, strip with Python's whitespace set, split. Case mapping is Unicode's simple mapping for
// ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin (plus ß -> SS); other
// scripts are left as they are. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pkv::chat::text {

std::vector<char32_t> Decode(std::string_view s);  // invalid bytes decode as U+FFFD
std::string Encode(const std::vector<char32_t>& cps);
size_t Length(std::string_view s);

// str.isspace() for one code point.
bool IsPySpace(char32_t cp);

// str.strip/lstrip/rstrip(chars): chars nullopt means whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);

// str.split(sep, maxsplit) / str.split() (sep nullopt: runs of whitespace, no empty parts).
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);

// str.splitlines(): breaks at \n, \r\n, \r, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029.
std::vector<std::string> SplitLines(std::string_view s);

// Approximates Python's regex \w (str.isalnum() or '_') for one code point: ASCII letters,
// digits and '_', and non-ASCII code points outside the common punctuation, symbol, emoji,
// combining-mark and joiner blocks.
bool IsWordChar(char32_t cp);

// Python's int(s) (base 10) and float(s): surrounding whitespace, a sign, '_' between digits;
// float also takes exponents, "inf", "infinity" and "nan". nullopt where Python raises (and for
// ints beyond int64).
std::optional<int64_t> PyParseInt(std::string_view s);
std::optional<double> PyParseFloat(std::string_view s);

std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Title(std::string_view s);       // str.title()
std::string Capitalize(std::string_view s);  // str.capitalize()

// str.replace(old, new, count); count < 0 means all.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// str.count(sub) (non-overlapping).
int64_t Count(std::string_view s, std::string_view sub);

}  // namespace pkv::chat::text
