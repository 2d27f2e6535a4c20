#include "chat_template/text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/utf8.h"

namespace pkv::chat::text {

std::vector<char32_t> Decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp;
    int n = utf8::DecodeChar(s, pos, &cp);
    if (n == 0) {
      cp = 0xFFFD;
      n = 1;
    }
    out.push_back(cp);
    pos += n;
  }
  return out;
}

std::string Encode(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t cp : cps) utf8::AppendChar(cp, &out);
  return out;
}

size_t Length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool IsPySpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::vector<char32_t> cps = Decode(s);
  std::vector<char32_t> set;
  if (chars) set = Decode(*chars);
  auto strip_it = [&](char32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : IsPySpace(cp);
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strip_it(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip_it(cps[end - 1])) --end;
  }
  return Encode(std::vector<char32_t>(cps.begin() + begin, cps.begin() + end));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    parts.emplace_back(s.substr(pos));
    return parts;
  }
  std::vector<char32_t> cps = Decode(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && IsPySpace(cps[i])) ++i;
    if (i >= cps.size()) break;
    size_t j = i;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      size_t end = cps.size();
      while (end > i && IsPySpace(cps[end - 1])) --end;
      parts.push_back(Encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + end)));
      break;
    }
    while (j < cps.size() && !IsPySpace(cps[j])) ++j;
    parts.push_back(Encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + j)));
    i = j;
  }
  return parts;
}

namespace {

// Removes '_' that sit between two digits; nullopt for any other '_'.
std::optional<std::string> StripUnderscores(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      out += s[i];
      continue;
    }
    if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
        !std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::optional<int64_t> PyParseInt(std::string_view s) {
  std::optional<std::string> t = StripUnderscores(Strip(s, std::nullopt, true, true));
  if (!t || t->empty()) return std::nullopt;
  size_t i = (*t)[0] == '+' || (*t)[0] == '-' ? 1 : 0;
  if (i >= t->size()) return std::nullopt;
  for (size_t k = i; k < t->size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>((*t)[k]))) return std::nullopt;
  }
  errno = 0;
  long long v = std::strtoll(t->c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> PyParseFloat(std::string_view s) {
  std::optional<std::string> t = StripUnderscores(Strip(s, std::nullopt, true, true));
  if (!t || t->empty()) return std::nullopt;
  std::string lower = Lower(*t);
  size_t i = lower[0] == '+' || lower[0] == '-' ? 1 : 0;
  std::string_view body = std::string_view(lower).substr(i);
  double sign = lower[0] == '-' ? -1 : 1;
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  if (body == "nan") return std::nan("");
  // Digits, at most one '.', an optional exponent: what strtod reads minus hex and inf/nan.
  size_t k = 0, digits = 0;
  while (k < body.size() && std::isdigit(static_cast<unsigned char>(body[k]))) ++k, ++digits;
  if (k < body.size() && body[k] == '.') {
    ++k;
    while (k < body.size() && std::isdigit(static_cast<unsigned char>(body[k]))) ++k, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (k < body.size() && body[k] == 'e') {
    ++k;
    if (k < body.size() && (body[k] == '+' || body[k] == '-')) ++k;
    size_t exp_start = k;
    while (k < body.size() && std::isdigit(static_cast<unsigned char>(body[k]))) ++k;
    if (k == exp_start) return std::nullopt;
  }
  if (k != body.size()) return std::nullopt;
  return std::strtod(t->c_str(), nullptr);
}

std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<std::string> lines;
  std::vector<char32_t> cps = Decode(s), line;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t cp = cps[i];
    bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
               cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) {
      line.push_back(cp);
      continue;
    }
    if (cp == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    lines.push_back(Encode(line));
    line.clear();
  }
  if (!line.empty()) lines.push_back(Encode(line));
  return lines;
}

bool IsWordChar(char32_t cp) {
  if (cp < 0x80) return std::isalnum(static_cast<int>(cp)) || cp == '_';
  struct Range {
    char32_t lo, hi;
  };
  static constexpr Range kNonWord[] = {
      {0x80, 0xA9},       {0xAB, 0xB1},      {0xB4, 0xB4},     {0xB6, 0xB8},     {0xBB, 0xBB},
      {0xBF, 0xBF},       {0xD7, 0xD7},      {0xF7, 0xF7},     {0x300, 0x36F},   {0x2000, 0x206F},
      {0x20A0, 0x20FF},   {0x2190, 0x2BFF},  {0x3000, 0x3004}, {0x3008, 0x3020}, {0x302A, 0x3030},
      {0x3036, 0x3037},   {0x303D, 0x303F},  {0x30A0, 0x30A0}, {0x30FB, 0x30FB}, {0xFE00, 0xFE0F},
      {0xFE30, 0xFE4F},   {0xFF01, 0xFF0F},  {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65},
      {0x1F000, 0x1FAFF}, {0xE0000, 0xE007F}};
  for (const Range& r : kNonWord) {
    if (cp >= r.lo && cp <= r.hi) return false;
  }
  return true;
}

namespace {

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin.
char32_t LowerCp(char32_t c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) ||
      (c >= 0x391 && c <= 0x3AB && c != 0x3A2) || (c >= 0x410 && c <= 0x42F) ||
      (c >= 0xFF21 && c <= 0xFF3A)) {
    return c + 0x20;
  }
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c == 0x178) return 0xFF;
  bool even_upper = (c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) ||
                    (c >= 0x14A && c <= 0x177) || (c >= 0x460 && c <= 0x481) ||
                    (c >= 0x48A && c <= 0x4BF);
  bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
  if ((even_upper && c % 2 == 0) || (odd_upper && c % 2 == 1)) return c + 1;
  return c;
}

char32_t UpperCp(char32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 0xE0 && c <= 0xFE && c != 0xF7) ||
      (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) || (c >= 0x430 && c <= 0x44F) ||
      (c >= 0xFF41 && c <= 0xFF5A)) {
    return c - 0x20;
  }
  if (c == 0x3C2) return 0x3A3;  // final sigma
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  bool even_upper = (c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) ||
                    (c >= 0x14A && c <= 0x177) || (c >= 0x460 && c <= 0x481) ||
                    (c >= 0x48A && c <= 0x4BF);
  bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
  if ((even_upper && c % 2 == 1) || (odd_upper && c % 2 == 0)) return c - 1;
  return c;
}

bool IsCased(char32_t c) { return LowerCp(c) != c || UpperCp(c) != c || c == 0xDF; }

void AppendUpper(char32_t c, std::string* out) {
  if (c == 0xDF) {  // ß
    *out += "SS";
  } else {
    utf8::AppendChar(UpperCp(c), out);
  }
}

}  // namespace

std::string Upper(std::string_view s) {
  std::string out;
  for (char32_t c : Decode(s)) AppendUpper(c, &out);
  return out;
}

std::string Lower(std::string_view s) {
  std::string out;
  for (char32_t c : Decode(s)) utf8::AppendChar(LowerCp(c), &out);
  return out;
}

std::string Title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : Decode(s)) {
    if (prev_cased) {
      utf8::AppendChar(LowerCp(c), &out);
    } else {
      AppendUpper(c, &out);
    }
    prev_cased = IsCased(c);
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : Decode(s)) {
    if (first) {
      AppendUpper(c, &out);
    } else {
      utf8::AppendChar(LowerCp(c), &out);
    }
    first = false;
  }
  return out;
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    std::vector<char32_t> cps = Decode(s);
    int64_t done = 0;
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      utf8::AppendChar(cp, &out);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t Count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(Length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos;
       pos = s.find(sub, pos + sub.size())) {
    ++n;
  }
  return n;
}

}  // namespace pkv::chat::text
