#include "chat_template/operators.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "chat_template/text.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

absl::Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    return absl::InvalidArgumentError("undefined value used in an expression");
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for ",
                                                 std::string(op), ": '", a.TypeName(), "' and '",
                                                 b.TypeName(), "'"));
}

absl::Status Overflow() { return absl::InvalidArgumentError("integer overflow"); }

bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }

absl::StatusOr<Value> Repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
  if (unit != 0 && static_cast<size_t>(n) > kMaxValueBytes / unit) {
    return absl::ResourceExhaustedError("chat template: value too large");
  }
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value::List(std::move(out), seq.is_tuple());
}

absl::StatusOr<Value> IntArith(std::string_view op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return Overflow();
  } else if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return Overflow();
  } else if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return Overflow();
  } else if (op == "//" || op == "%") {
    if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return Overflow();
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors
      --q;
      m += y;
    }
    r = op == "//" ? q : m;
  } else if (op == "**") {
    if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    for (int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(r, x, &r)) return Overflow();
      if (r == 0 || r == 1) break;
    }
    if (r == 1 && x == -1 && y % 2 == 1) r = -1;
  }
  return Value::Int(r);
}

absl::StatusOr<Value> FloatArith(std::string_view op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return absl::InvalidArgumentError("division by zero");
    return Value::Float(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return absl::InvalidArgumentError("float division or modulo by zero");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value::Float(m);
    return Value::Float(std::floor((x - m) / y + 0.5));
  }
  return Value::Float(std::pow(x, y));
}

// Python's printf-style `str % args` for the conversions templates use: %s %r %d %i %%.
absl::StatusOr<Value> PercentFormat(const std::string& fmt, const Value& args) {
  ValueList items = args.is_tuple() ? args.list() : ValueList{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    char conv = i + 1 < fmt.size() ? fmt[++i] : '\0';
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (conv != 's' && conv != 'r' && conv != 'd' && conv != 'i') {
      return absl::InvalidArgumentError("unsupported format character in '%' formatting");
    }
    if (next >= items.size()) {
      return absl::InvalidArgumentError("not enough arguments for format string");
    }
    const Value& v = items[next++];
    if (conv == 's') {
      out += v.ToStr();
    } else if (conv == 'r') {
      out += v.ToRepr();
    } else if (v.is_float() && std::isfinite(v.float_value())) {
      absl::StrAppend(&out, static_cast<int64_t>(v.float_value()));
    } else if (v.is_int() || v.is_bool()) {
      absl::StrAppend(&out, v.int_value());
    } else {
      return absl::InvalidArgumentError("%d format: a real number is required");
    }
  }
  if (next != items.size()) {
    return absl::InvalidArgumentError("not all arguments converted during string formatting");
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Arith(std::string_view op, const Value& a, const Value& b) {
  if (op == "%" && a.is_string()) return PercentFormat(a.str(), b);
  if (a.is_number() && b.is_number()) {
    if (op == "/" || a.is_float() || b.is_float()) {
      return FloatArith(op, a.float_value(), b.float_value());
    }
    return IntArith(op, a.int_value(), b.int_value());
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    if (a.str().size() + b.str().size() > kMaxValueBytes) {
      return absl::ResourceExhaustedError("chat template: value too large");
    }
    return Value::String(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    ValueList out = a.list();
    out.insert(out.end(), b.list().begin(), b.list().end());
    return Value::List(std::move(out), a.is_tuple());
  }
  if (op == "*" && (a.is_string() || a.is_list()) && IsIntLike(b)) return Repeat(a, b.int_value());
  if (op == "*" && (b.is_string() || b.is_list()) && IsIntLike(a)) return Repeat(b, a.int_value());
  return Unsupported(op, a, b);
}

}  // namespace

absl::StatusOr<bool> LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.float_value() < b.float_value();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    size_t n = std::min(a.list().size(), b.list().size());
    for (size_t i = 0; i < n; ++i) {
      if (ValuesEqual(a.list()[i], b.list()[i])) continue;
      return LessThan(a.list()[i], b.list()[i]);
    }
    return a.list().size() < b.list().size();
  }
  return Unsupported("<", a, b);
}

absl::StatusOr<ValueList> Iterate(const Value& v) {
  if (v.is_list()) return v.list();
  if (v.is_undefined()) return ValueList();
  if (v.is_dict() && !v.is_namespace()) {
    ValueList keys;
    for (const auto& item : v.dict().items) keys.push_back(Value::String(item.first));
    return keys;
  }
  if (v.is_string()) {
    ValueList chars;
    for (char32_t cp : text::Decode(v.str())) chars.push_back(Value::String(text::Encode({cp})));
    return chars;
  }
  return absl::InvalidArgumentError(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
}

absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string()) {
      return absl::InvalidArgumentError("'in <string>' requires string as left operand");
    }
    return haystack.str().find(needle.str()) != std::string::npos;
  }
  if (haystack.is_list()) {
    for (const Value& v : haystack.list()) {
      if (ValuesEqual(v, needle)) return true;
    }
    return false;
  }
  if (haystack.is_dict() && !haystack.is_namespace()) {
    return needle.is_string() && haystack.dict().Find(needle.str()) != nullptr;
  }
  if (haystack.is_undefined()) return false;  // Undefined iterates as empty
  return absl::InvalidArgumentError(
      absl::StrCat("argument of type '", haystack.TypeName(), "' is not iterable"));
}

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out = a.ToStr() + b.ToStr();
    if (out.size() > kMaxValueBytes)
      return absl::ResourceExhaustedError("chat template: value too large");
    return Value::String(std::move(out));
  }
  if (op == "==") return Value::Bool(ValuesEqual(a, b));
  if (op == "!=") return Value::Bool(!ValuesEqual(a, b));
  if (op == "in" || op == "not in") {
    PKV_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return Value::Bool(op == "in" ? in : !in);
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    bool swap = op == ">" || op == "<=";
    PKV_ASSIGN_OR_RETURN(bool less, swap ? LessThan(b, a) : LessThan(a, b));
    return Value::Bool(op.size() == 2 ? !less : less);
  }
  return Arith(op, a, b);
}

}  // namespace pkv::chat
