#include "chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "chat_template/text.h"
#include "common/utf8.h"

namespace pkv::chat {

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.int_ = b ? 1 : 0;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::List(ValueList items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.is_tuple_ = is_tuple;
  for (const Value& item : items) v.depth_ = std::max(v.depth_, item.depth_ + 1);
  if (items.empty()) v.depth_ = 1;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::Dict(std::shared_ptr<ValueDict> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = 1;
  if (!dict->is_namespace) {
    for (const auto& item : dict->items) v.depth_ = std::max(v.depth_, item.second.depth_ + 1);
  }
  v.dict_ = std::move(dict);
  return v;
}
Value Value::EmptyDict(bool is_namespace) {
  auto d = std::make_shared<ValueDict>();
  d->is_namespace = is_namespace;
  return Dict(std::move(d));
}
Value Value::Callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.str_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<const NativeFunction>(std::move(fn));
  return v;
}

Value Value::FromJson(const JsonValue& json) {
  switch (json.type()) {
    case JsonValue::Type::kNull:
      return None();
    case JsonValue::Type::kBool:
      return Bool(json.bool_value());
    case JsonValue::Type::kNumber:
      return json.is_integer() ? Int(json.integer()) : Float(json.number());
    case JsonValue::Type::kString:
      return String(json.str());
    case JsonValue::Type::kArray: {
      ValueList items;
      items.reserve(json.items().size());
      for (const JsonValue& item : json.items()) items.push_back(FromJson(item));
      return List(std::move(items));
    }
    case JsonValue::Type::kObject: {
      auto dict = std::make_shared<ValueDict>();
      for (const auto& [key, member] : json.members()) dict->Set(key, FromJson(member));
      return Dict(std::move(dict));
    }
  }
  return Value();
}

bool Value::is_namespace() const { return is_dict() && dict_->is_namespace; }

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !str_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return dict_->is_namespace || !dict_->items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exponent = std::atoi(sci.c_str() + e + 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  // Python's repr: positional notation when -4 <= exponent < 16, else scientific.
  std::string out = negative ? "-" : "";
  int n = static_cast<int>(digits.size());
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      absl::StrAppend(&out, "0.", std::string(-exponent - 1, '0'), digits);
    } else if (exponent + 1 >= n) {
      absl::StrAppend(&out, digits, std::string(exponent + 1 - n, '0'), ".0");
    } else {
      absl::StrAppend(&out, digits.substr(0, exponent + 1), ".", digits.substr(exponent + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) absl::StrAppend(&out, ".", digits.substr(1));
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

namespace {

// str.isprintable() for one code point, approximately: control and format characters, separators
// other than ' ', surrogates and private use are not printable (unassigned ones are not known).
bool IsPrintable(char32_t cp) {
  struct Range {
    char32_t lo, hi;
  };
  static constexpr Range kNonPrintable[] = {
      {0x00, 0x1F},     {0x7F, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},
      {0x61C, 0x61C},   {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x1680, 0x1680},
      {0x180E, 0x180E}, {0x2000, 0x200F},   {0x2028, 0x202F},   {0x205F, 0x2064},
      {0x2066, 0x206F}, {0x3000, 0x3000},   {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},
      {0xFFF9, 0xFFFB}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF}};
  for (const Range& r : kNonPrintable) {
    if (cp >= r.lo && cp <= r.hi) return false;
  }
  return true;
}

}  // namespace

std::string PyStringRepr(std::string_view s) {
  char quote = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos)
                   ? '"'
                   : '\'';
  std::string out(1, quote);
  for (char32_t c : text::Decode(s)) {
    if (c == '\\' || c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!IsPrintable(c)) {
      char buf[16];
      std::snprintf(buf, sizeof(buf),
                    c < 0x100     ? "\\x%02x"
                    : c < 0x10000 ? "\\u%04x"
                                  : "\\U%08x",
                    static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8::AppendChar(c, &out);
    }
  }
  out += quote;
  return out;
}

std::string Value::ToStr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *str_;
    default:
      return ToRepr();
  }
}

std::string Value::ToRepr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return int_ ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(int_);
    case Kind::kFloat:
      return PyFloatRepr(float_);
    case Kind::kString:
      return PyStringRepr(*str_);
    case Kind::kList: {
      std::string out = is_tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].ToRepr();
      }
      if (is_tuple_ && list_->size() == 1) out += ",";
      return out + (is_tuple_ ? ")" : "]");
    }
    case Kind::kDict: {
      if (dict_->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        if (i > 0) out += ", ";
        absl::StrAppend(&out, PyStringRepr(dict_->items[i].first), ": ",
                        dict_->items[i].second.ToRepr());
      }
      return out + "}";
    }
    case Kind::kCallable:
      return absl::StrCat("<function ", *str_, ">");
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return is_tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool ValuesEqual(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.float_value() == b.float_value();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!ValuesEqual(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (&a.dict() == &b.dict()) return true;
      if (a.is_namespace() || b.is_namespace()) return false;
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !ValuesEqual(v, *other)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace pkv::chat
