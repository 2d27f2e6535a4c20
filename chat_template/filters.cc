// Text, number and JSON filters, and the dispatch to filters_sequence.cc.
#include "chat_template/filters.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chat_template/call_args.h"
#include "chat_template/filters_internal.h"
#include "chat_template/json_dump.h"
#include "chat_template/operators.h"
#include "chat_template/text.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv::chat {
namespace {

using internal::ApplySequenceFilter;

std::string EscapeNonAscii(std::string_view s) {
  std::string out;
  for (char32_t cp : text::Decode(s)) {
    char buf[16];
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      unsigned v = static_cast<unsigned>(cp) - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += buf;
    }
  }
  return out;
}

// transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
absl::StatusOr<Value> ToJsonFilter(const Value& value, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(
      auto a, BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0));
  JsonDumpOptions options;
  if (a[1].is_int()) {
    options.indent = std::string(std::max<int64_t>(0, a[1].int_value()), ' ');
  } else if (a[1].is_string()) {
    options.indent = a[1].str();
  } else if (!a[1].is_undefined() && !a[1].is_none()) {
    return absl::InvalidArgumentError("tojson(): indent must be an int or a string");
  }
  if (a[2].is_list() && a[2].list().size() == 2 && a[2].list()[0].is_string() &&
      a[2].list()[1].is_string()) {
    options.item_separator = a[2].list()[0].str();
    options.key_separator = a[2].list()[1].str();
  } else if (!a[2].is_undefined() && !a[2].is_none()) {
    return absl::InvalidArgumentError("tojson(): separators must be a pair of strings");
  }
  options.sort_keys = a[3].Truthy();
  PKV_ASSIGN_OR_RETURN(std::string json, JsonDump(value, options));
  if (a[0].Truthy()) json = EscapeNonAscii(json);
  return Value::String(std::move(json));
}

// jinja2's title: each run between separators (whitespace, '-', '(', '{', '[', '<') gets its
// first character upper-cased and the rest lower-cased.
std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (char32_t c : text::Decode(s)) {
    std::string one;
    utf8::AppendChar(c, &one);
    bool sep = text::IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    out += sep ? one : word_start ? text::Upper(one) : text::Lower(one);
    word_start = sep;
  }
  return out;
}

// jinja2: (s + "\n").splitlines(), then lines after the first get the pad unless blank.
std::string Indent(std::string s, const std::string& pad, bool first, bool blank) {
  std::vector<std::string> lines = text::SplitLines(s + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    bool indent = (i > 0 || first) && (blank || !lines[i].empty() || (i == 0 && first));
    if (indent) out += pad;
    out += lines[i];
  }
  return out;
}

absl::StatusOr<Value> IndentFilter(const Value& value, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("indent", args, {"width", "first", "blank"}, 0));
  std::string pad = "    ";
  if (a[0].is_string()) {
    pad = a[0].str();
  } else if (!a[0].is_undefined()) {
    PKV_ASSIGN_OR_RETURN(int64_t width, IntArg("indent", a[0]));
    pad = std::string(std::clamp<int64_t>(width, 0, 1 << 16), ' ');
  }
  return Value::String(Indent(value.ToStr(), pad, a[1].Truthy(), a[2].Truthy()));
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

absl::StatusOr<Value> NumberFilter(std::string_view name, const Value& value,
                                   const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"default", "base"}, 0));
  if (name == "int") {
    Value dflt = a[0].is_undefined() ? Value::Int(0) : a[0];
    if (value.is_int() || value.is_bool()) return Value::Int(value.int_value());
    if (value.is_float()) {
      if (!std::isfinite(value.float_value())) return dflt;
      return Value::Int(static_cast<int64_t>(value.float_value()));
    }
    if (!value.is_string()) return dflt;
    // jinja2: int(s), else int(float(s)), else the default.
    if (std::optional<int64_t> i = text::PyParseInt(value.str())) return Value::Int(*i);
    std::optional<double> d = text::PyParseFloat(value.str());
    if (d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(*d));
    }
    return dflt;
  }
  Value dflt = a[0].is_undefined() ? Value::Float(0) : a[0];
  if (value.is_number()) return Value::Float(value.float_value());
  double d;
  if (value.is_string() &&
      absl::SimpleAtod(text::Strip(value.str(), std::nullopt, true, true), &d)) {
    return Value::Float(d);
  }
  return dflt;
}

absl::StatusOr<Value> RoundFilter(const Value& value, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("round", args, {"precision", "method"}, 0));
  if (!value.is_number()) return absl::InvalidArgumentError("round(): expected a number");
  int64_t precision = 0;
  if (!a[0].is_undefined()) {
    PKV_ASSIGN_OR_RETURN(precision, IntArg("round", a[0]));
  }
  std::string method = a[1].is_string() ? a[1].str() : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return absl::InvalidArgumentError("round(): method must be common, ceil or floor");
  }
  // jinja2: round(value, precision) for "common" (an int stays an int; halves go to the even
  // neighbour of the exact binary value, which printf's correct rounding reproduces), else
  // math.ceil/floor(value * 10**precision) / 10**precision.
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "common") {
    if (!value.is_float()) return Value::Int(value.int_value());
    double x = value.float_value();
    if (!std::isfinite(x)) return Value::Float(x);
    if (precision < 0)
      return Value::Float(std::nearbyint(x / std::pow(10.0, -precision)) *
                          std::pow(10.0, -precision));
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)), x);
    return Value::Float(std::strtod(buf, nullptr));
  }
  double x = value.float_value() * scale;
  x = method == "ceil" ? std::ceil(x) : std::floor(x);
  return Value::Float(x / scale);
}

absl::StatusOr<Value> TextFilter(std::string_view name, const Value& value, const CallArgs& args) {
  if (name == "trim") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"chars"}, 0));
    std::optional<std::string> chars;
    if (a[0].is_string()) chars = a[0].str();
    return Value::String(text::Strip(value.ToStr(), chars, true, true));
  }
  if (name == "replace") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"old", "new", "count"}, 2));
    int64_t count = -1;
    if (!a[2].is_undefined() && !a[2].is_none()) {
      PKV_ASSIGN_OR_RETURN(count, IntArg(name, a[2]));
    }
    std::string out = text::Replace(value.ToStr(), a[0].ToStr(), a[1].ToStr(), count);
    if (out.size() > kMaxValueBytes)
      return absl::ResourceExhaustedError("chat template: value too large");
    return Value::String(std::move(out));
  }
  if (name == "indent") return IndentFilter(value, args);
  if (name == "center") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"width"}, 0));
    int64_t width = 80;
    if (!a[0].is_undefined()) {
      PKV_ASSIGN_OR_RETURN(width, IntArg(name, a[0]));
    }
    std::string s = value.ToStr();
    int64_t len = static_cast<int64_t>(text::Length(s));
    if (width > (1 << 20)) return absl::ResourceExhaustedError("chat template: value too large");
    if (width <= len) return Value::String(s);
    int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value::String(std::string(left, ' ') + s + std::string(total - left, ' '));
  }
  PKV_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  std::string s = value.ToStr();
  if (name == "upper") return Value::String(text::Upper(s));
  if (name == "lower") return Value::String(text::Lower(s));
  if (name == "title") return Value::String(JinjaTitle(s));
  if (name == "capitalize") return Value::String(text::Capitalize(s));
  if (name == "string" || name == "safe") return Value::String(std::move(s));
  if (name == "escape" || name == "e") return Value::String(HtmlEscape(s));
  // wordcount: jinja2 counts matches of the regex \w+.
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : text::Decode(s)) {
    bool w = text::IsWordChar(c);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::Int(words);
}

bool IsTextFilter(std::string_view name) {
  for (std::string_view n : {"trim", "replace", "indent", "center", "upper", "lower", "title",
                             "capitalize", "string", "safe", "escape", "e", "wordcount"}) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& value, const CallArgs& args) {
  if (name == "default" || name == "d") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"default_value", "boolean"}, 0));
    bool use_default = a[1].Truthy() ? !value.Truthy() : value.is_undefined();
    if (!use_default) return value;
    return a[0].is_undefined() ? Value::String("") : a[0];
  }
  if (name == "tojson") return ToJsonFilter(value, args);
  if (IsTextFilter(name)) return TextFilter(name, value, args);
  if (name == "int" || name == "float") return NumberFilter(name, value, args);
  if (name == "round") return RoundFilter(value, args);
  if (name == "abs") {
    PKV_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
    if (value.is_float()) return Value::Float(std::fabs(value.float_value()));
    if (value.is_int() || value.is_bool()) {
      if (value.int_value() == INT64_MIN) return absl::InvalidArgumentError("integer overflow");
      return Value::Int(std::llabs(value.int_value()));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("bad operand type for abs(): '", value.TypeName(), "'"));
  }
  absl::StatusOr<Value> result = ApplySequenceFilter(name, value, args);
  if (absl::IsNotFound(result.status())) {
    return absl::InvalidArgumentError(absl::StrCat("no filter named '", std::string(name), "'"));
  }
  return result;
}

}  // namespace pkv::chat
