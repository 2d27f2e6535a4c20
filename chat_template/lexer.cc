#include "chat_template/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv::chat {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string Normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(Normalize(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  absl::StatusOr<std::vector<Token>> Run();

 private:
  absl::Status Error(size_t pos, std::string_view what) const {
    Token t = Make(TokenType::kEof, "", pos);
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: line ", t.line, " col ", t.col, ": ", std::string(what)));
  }
  Token Make(TokenType type, std::string text, size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return Token{type, std::move(text), static_cast<int>(line),
                 static_cast<int>(pos - line_starts_[line - 1] + 1)};
  }
  void EmitText(std::string text, size_t pos);
  std::string TextBeforeTag(size_t start, size_t tag) const;
  absl::Status AppendEscape(size_t string_start, std::string* out);
  absl::Status LexTag(char kind);
  absl::Status LexExpressionToken(int* depth);
  absl::Status LexString();
  void LexNumber();
  void SkipAfterTagEnd(bool strip, bool trim_newline);

  std::string src_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

void Lexer::EmitText(std::string text, size_t pos) {
  if (!text.empty()) tokens_.push_back(Make(TokenType::kText, std::move(text), pos));
}

void Lexer::SkipAfterTagEnd(bool strip, bool trim_newline) {
  if (strip) {
    while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
  } else if (trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
    ++pos_;
  }
}

// The text src_[start, tag) before a tag, after the tag's whitespace control: "{%-" strips all
// trailing whitespace; otherwise lstrip_blocks removes spaces and tabs between a line start and a
// block or comment tag (jinja2 counts the template start, and a start right after a newline the
// previous tag consumed, as line starts).
std::string Lexer::TextBeforeTag(size_t start, size_t tag) const {
  char kind = src_[tag + 1];
  char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
  std::string text = src_.substr(start, tag - start);
  if (modifier == '-') {
    while (!text.empty() && IsSpace(text.back())) text.pop_back();
    return text;
  }
  if (modifier == '+' || kind == '{') return text;
  size_t line_start = text.rfind('\n');
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  bool line_starting = start == 0 || src_[start - 1] == '\n';
  if ((line_start > 0 || line_starting) &&
      std::all_of(text.begin() + line_start, text.end(),
                  [](char c) { return IsSpace(c) && c != '\n'; })) {
    text.resize(line_start);
  }
  return text;
}

absl::StatusOr<std::vector<Token>> Lexer::Run() {
  while (pos_ < src_.size()) {
    size_t start = pos_;
    size_t tag = src_.find('{', pos_);
    while (tag != std::string::npos && tag + 1 < src_.size() && src_[tag + 1] != '{' &&
           src_[tag + 1] != '%' && src_[tag + 1] != '#') {
      tag = src_.find('{', tag + 1);
    }
    if (tag == std::string::npos || tag + 1 >= src_.size()) {
      EmitText(src_.substr(start), start);
      break;
    }
    char kind = src_[tag + 1];
    EmitText(TextBeforeTag(start, tag), start);
    pos_ = tag;
    absl::Status status = LexTag(kind);
    if (!status.ok()) return status;
  }
  tokens_.push_back(Make(TokenType::kEof, "", src_.size()));
  return std::move(tokens_);
}

absl::Status Lexer::LexTag(char kind) {
  size_t open = pos_;
  pos_ += 2;
  if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
  if (kind == '#') {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return Error(open, "unterminated comment");
    bool strip = end > pos_ && src_[end - 1] == '-';
    bool keep = end > pos_ && src_[end - 1] == '+';
    pos_ = end + 2;
    SkipAfterTagEnd(strip, !keep);
    return absl::OkStatus();
  }
  bool is_block = kind == '%';
  tokens_.push_back(Make(is_block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", open));
  const char close = is_block ? '%' : '}';
  int depth = 0;  // open brackets: while > 0 a "}}" belongs to the expression
  while (true) {
    while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
    if (pos_ >= src_.size()) return Error(open, "unterminated tag");
    size_t p = pos_;
    char m = src_[p];
    if (depth == 0 && (m == '-' || m == '+') && p + 2 < src_.size() + 0 && src_[p + 1] == close &&
        src_[p + 2] == '}') {
      p += 1;
    }
    if (depth == 0 && src_[p] == close && p + 1 < src_.size() && src_[p + 1] == '}') {
      tokens_.push_back(Make(is_block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", pos_));
      pos_ = p + 2;
      SkipAfterTagEnd(m == '-', is_block && m != '+');
      return absl::OkStatus();
    }
    absl::Status status = LexExpressionToken(&depth);
    if (!status.ok()) return status;
  }
}

absl::Status Lexer::LexExpressionToken(int* depth) {
  char c = src_[pos_];
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    size_t start = pos_;
    while (pos_ < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
      ++pos_;
    }
    tokens_.push_back(Make(TokenType::kName, src_.substr(start, pos_ - start), start));
    return absl::OkStatus();
  }
  if (std::isdigit(static_cast<unsigned char>(c))) {
    LexNumber();
    return absl::OkStatus();
  }
  if (c == '\'' || c == '"') return LexString();
  static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
  for (std::string_view op : kTwo) {
    if (src_.compare(pos_, 2, op) == 0) {
      tokens_.push_back(Make(TokenType::kOperator, std::string(op), pos_));
      pos_ += 2;
      return absl::OkStatus();
    }
  }
  if (std::string_view("+-*/%~<>=.,:|()[]{};").find(c) == std::string_view::npos) {
    return Error(pos_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }
  if (c == '(' || c == '[' || c == '{') ++*depth;
  if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
  tokens_.push_back(Make(TokenType::kOperator, std::string(1, c), pos_));
  ++pos_;
  return absl::OkStatus();
}

void Lexer::LexNumber() {
  size_t start = pos_;
  auto digits = [&] {
    while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) ||
                                  (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                   std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))))) {
      ++pos_;
    }
  };
  digits();
  bool is_float = false;
  if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
      std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
    is_float = true;
    ++pos_;
    digits();
  }
  if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
    size_t save = pos_++;
    if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
    if (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) {
      is_float = true;
      digits();
    } else {
      pos_ = save;
    }
  }
  std::string text = src_.substr(start, pos_ - start);
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  tokens_.push_back(Make(is_float ? TokenType::kFloat : TokenType::kInt, text, start));
}

// One escape of a string literal, decoded as Python's unicode-escape does (jinja2 decodes
// literals that way); pos_ is just past the backslash. Unknown escapes stay verbatim.
absl::Status Lexer::AppendEscape(size_t string_start, std::string* out) {
  if (pos_ >= src_.size()) return Error(string_start, "unterminated string");
  char e = src_[pos_++];
  static constexpr std::string_view kFrom = "ntrabfv\\'\"";
  static constexpr std::string_view kTo = "\n\t\r\a\b\f\v\\'\"";
  if (size_t k = kFrom.find(e); k != std::string_view::npos) {
    *out += kTo[k];
    return absl::OkStatus();
  }
  if (e == '\n') return absl::OkStatus();  // line continuation
  if (e == 'x' || e == 'u' || e == 'U') {
    size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
    if (pos_ + n > src_.size() ||
        !std::all_of(src_.begin() + pos_, src_.begin() + pos_ + n,
                     [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
      return Error(string_start, "truncated \\x/\\u escape in string");
    }
    char32_t cp = static_cast<char32_t>(std::strtoul(src_.substr(pos_, n).c_str(), nullptr, 16));
    pos_ += n;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Error(string_start, "escape is not a Unicode scalar value");
    }
    utf8::AppendChar(cp, out);
    return absl::OkStatus();
  }
  if (e >= '0' && e <= '7') {
    int v = e - '0';
    for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
      v = v * 8 + (src_[pos_++] - '0');
    }
    utf8::AppendChar(static_cast<char32_t>(v), out);
    return absl::OkStatus();
  }
  *out += '\\';
  *out += e;
  return absl::OkStatus();
}

absl::Status Lexer::LexString() {
  size_t start = pos_;
  char quote = src_[pos_++];
  std::string out;
  while (true) {
    if (pos_ >= src_.size()) return Error(start, "unterminated string");
    char c = src_[pos_++];
    if (c == quote) break;
    if (c == '\\') {
      PKV_RETURN_IF_ERROR(AppendEscape(start, &out));
    } else {
      out += c;
    }
  }
  tokens_.push_back(Make(TokenType::kString, std::move(out), start));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) { return Lexer(source).Run(); }

}  // namespace pkv::chat
