#include "common/json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace pkv {

JsonValue JsonValue::Bool(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}
JsonValue JsonValue::Number(double d, bool is_integer, int64_t integer) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = d;
  v.is_integer_ = is_integer;
  v.integer_ = integer;
  return v;
}
JsonValue JsonValue::String(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(s);
  return v;
}
JsonValue JsonValue::Array(std::vector<JsonValue> items) {
  JsonValue v;
  v.type_ = Type::kArray;
  v.items_ = std::move(items);
  return v;
}
JsonValue JsonValue::Object(std::vector<Member> members) {
  JsonValue v;
  v.type_ = Type::kObject;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const Member& m : members_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    JsonValue v;
    absl::Status st = ParseValue(0, &v);
    if (!st.ok()) return st;
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters after the JSON value");
    return v;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON at byte ", pos_, ": ",
                                                   absl::string_view(what.data(), what.size())));
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status ParseValue(int depth, JsonValue* out) {
    if (depth > kMaxJsonDepth) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      std::string str;
      absl::Status st = ParseString(&str);
      if (!st.ok()) return st;
      *out = JsonValue::String(std::move(str));
      return absl::OkStatus();
    }
    if (Consume("true")) {
      *out = JsonValue::Bool(true);
      return absl::OkStatus();
    }
    if (Consume("false")) {
      *out = JsonValue::Bool(false);
      return absl::OkStatus();
    }
    if (Consume("null")) {
      *out = JsonValue();
      return absl::OkStatus();
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    return Error("unexpected character");
  }

  absl::Status ParseObject(int depth, JsonValue* out) {
    ++pos_;  // '{'
    std::vector<JsonValue::Member> members;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      *out = JsonValue::Object(std::move(members));
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string key");
      std::string key;
      absl::Status st = ParseString(&key);
      if (!st.ok()) return st;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      JsonValue value;
      st = ParseValue(depth + 1, &value);
      if (!st.ok()) return st;
      members.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (pos_ >= s_.size()) return Error("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        break;
      }
      return Error("expected ',' or '}'");
    }
    *out = JsonValue::Object(std::move(members));
    return absl::OkStatus();
  }

  absl::Status ParseArray(int depth, JsonValue* out) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      *out = JsonValue::Array(std::move(items));
      return absl::OkStatus();
    }
    while (true) {
      JsonValue value;
      absl::Status st = ParseValue(depth + 1, &value);
      if (!st.ok()) return st;
      items.push_back(std::move(value));
      SkipSpace();
      if (pos_ >= s_.size()) return Error("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        break;
      }
      return Error("expected ',' or ']'");
    }
    *out = JsonValue::Array(std::move(items));
    return absl::OkStatus();
  }

  bool ParseHex4(uint32_t* cp) {
    if (pos_ + 4 > s_.size()) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return false;
    }
    pos_ += 4;
    *cp = v;
    return true;
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      // Copy the run of plain characters in one go (tokenizer.json is megabytes of strings).
      size_t run = pos_;
      while (run < s_.size() && s_[run] != '"' && s_[run] != '\\' &&
             static_cast<unsigned char>(s_[run]) >= 0x20) {
        ++run;
      }
      out->append(s_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c != '\\') return Error("control character in string");
      ++pos_;
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!ParseHex4(&cp)) return Error("bad \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (!Consume("\\u") || !ParseHex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) {
              return Error("unpaired surrogate in \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Error("unpaired surrogate in \\u escape");
          }
          utf8::AppendChar(static_cast<char32_t>(cp), out);
          break;
        }
        default:
          return Error("unknown escape");
      }
    }
  }

  absl::Status ParseNumber(JsonValue* out) {
    const size_t start = pos_;
    bool integral = true;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return Error("bad number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return Error("bad number");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return Error("bad number");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    const std::string text(s_.substr(start, pos_ - start));
    const double d = std::strtod(text.c_str(), nullptr);
    int64_t i = 0;
    if (integral) {
      errno = 0;
      const long long ll = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) {
        integral = false;
      } else {
        i = ll;
      }
    }
    *out = JsonValue::Number(d, integral, i);
    return absl::OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

absl::Status FieldError(std::string_view context, std::string_view name, std::string_view what) {
  auto sv = [](std::string_view x) { return absl::string_view(x.data(), x.size()); };
  return absl::InvalidArgumentError(
      absl::StrCat(sv(context), ": field '", sv(name), "' ", sv(what)));
}

}  // namespace

absl::StatusOr<JsonValue> ParseJson(std::string_view text) { return Parser(text).ParseDocument(); }

absl::StatusOr<int64_t> JsonGetInt(const JsonValue& obj, std::string_view name,
                                   std::string_view context) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr) return FieldError(context, name, "is missing");
  if (!v->is_integer()) return FieldError(context, name, "must be an integer");
  return v->integer();
}

absl::StatusOr<int64_t> JsonGetIntOr(const JsonValue& obj, std::string_view name, int64_t dflt,
                                     std::string_view context) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr || v->is_null()) return dflt;
  if (!v->is_integer()) return FieldError(context, name, "must be an integer");
  return v->integer();
}

absl::StatusOr<double> JsonGetNumberOr(const JsonValue& obj, std::string_view name, double dflt,
                                       std::string_view context) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr || v->is_null()) return dflt;
  if (!v->is_number() || !std::isfinite(v->number())) {
    return FieldError(context, name, "must be a finite number");
  }
  return v->number();
}

absl::StatusOr<std::string> JsonGetStringOr(const JsonValue& obj, std::string_view name,
                                            std::string_view dflt, std::string_view context) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr || v->is_null()) return std::string(dflt);
  if (!v->is_string()) return FieldError(context, name, "must be a string");
  return v->str();
}

absl::StatusOr<bool> JsonGetBoolOr(const JsonValue& obj, std::string_view name, bool dflt,
                                   std::string_view context) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr || v->is_null()) return dflt;
  if (!v->is_bool()) return FieldError(context, name, "must be true or false");
  return v->bool_value();
}

}  // namespace pkv
