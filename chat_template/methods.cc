#include "chat_template/methods.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chat_template/call_args.h"
#include "chat_template/operators.h"
#include "chat_template/text.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

constexpr std::string_view kStrMethods[] = {
    "strip", "lstrip",     "rstrip",     "split",   "startswith", "endswith", "upper",
    "lower", "title",      "capitalize", "replace", "find",       "rfind",    "count",
    "join",  "splitlines", "isdigit",    "isspace", "format"};
constexpr std::string_view kDictMethods[] = {"items",  "keys",  "values",     "get",     "pop",
                                             "update", "clear", "setdefault", "popitem", "copy"};
constexpr std::string_view kListMethods[] = {"index", "count",  "append", "extend", "insert",
                                             "pop",   "remove", "clear",  "sort",   "reverse"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

absl::StatusOr<std::optional<std::string>> OptStr(std::string_view fn, const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::optional<std::string>();
  PKV_ASSIGN_OR_RETURN(std::string s, StrArg(fn, v));
  return std::optional<std::string>(std::move(s));
}

absl::StatusOr<Value> AffixTest(std::string_view name, const std::string& s, const Value& arg) {
  ValueList options;
  if (arg.is_tuple()) {
    options = arg.list();
  } else {
    options.push_back(arg);
  }
  for (const Value& o : options) {
    PKV_ASSIGN_OR_RETURN(std::string affix, StrArg(name, o));
    if (name == "startswith" ? absl::StartsWith(s, affix) : absl::EndsWith(s, affix)) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

absl::StatusOr<Value> StrListOf(std::vector<std::string> parts) {
  ValueList out;
  for (std::string& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::List(std::move(out));
}

// str.format with {}, {0}, {name} fields and {{ }} escapes; conversions and format specs are
// refused.
absl::StatusOr<Value> Format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') return absl::InvalidArgumentError("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    size_t end = fmt.find('}', i);
    if (end == std::string::npos) {
      return absl::InvalidArgumentError("Single '{' encountered in format string");
    }
    std::string field = fmt.substr(i + 1, end - i - 1);
    i = end;
    if (field.find_first_of(":!.[") != std::string::npos) {
      return absl::InvalidArgumentError("str.format(): format specs are not supported");
    }
    const Value* v = nullptr;
    size_t index;
    if (field.empty() || absl::SimpleAtoi(field, &index)) {
      if (field.empty()) index = auto_index++;
      if (index < args.positional.size()) v = &args.positional[index];
    } else {
      for (const auto& [name, value] : args.keyword) {
        if (name == field) v = &value;
      }
    }
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("str.format(): no argument for {", field, "}"));
    }
    out += v->ToStr();
  }
  return Value::String(std::move(out));
}

// upper, lower, title, capitalize, splitlines, isdigit, isspace: methods without arguments.
absl::StatusOr<Value> PlainStrMethod(const std::string& s, std::string_view name) {
  if (name == "upper") return Value::String(text::Upper(s));
  if (name == "lower") return Value::String(text::Lower(s));
  if (name == "title") return Value::String(text::Title(s));
  if (name == "capitalize") return Value::String(text::Capitalize(s));
  if (name == "isdigit") {
    return Value::Bool(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos);
  }
  if (name == "isspace") {
    auto cps = text::Decode(s);
    bool all = !cps.empty();
    for (char32_t cp : cps) all = all && text::IsPySpace(cp);
    return Value::Bool(all);
  }
  return StrListOf(text::SplitLines(s));
}

absl::StatusOr<Value> ReplaceMethod(const std::string& s, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  PKV_ASSIGN_OR_RETURN(std::string from, StrArg("replace", a[0]));
  PKV_ASSIGN_OR_RETURN(std::string to, StrArg("replace", a[1]));
  int64_t count = -1;
  if (!a[2].is_undefined()) {
    PKV_ASSIGN_OR_RETURN(count, IntArg("replace", a[2]));
  }
  std::string out = text::Replace(s, from, to, count);
  if (out.size() > kMaxValueBytes) {
    return absl::ResourceExhaustedError("chat template: value too large");
  }
  return Value::String(std::move(out));
}

// find/rfind return code-point offsets, as Python counts.
absl::StatusOr<Value> SearchMethod(const std::string& s, std::string_view name,
                                   const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sub"}, 1));
  PKV_ASSIGN_OR_RETURN(std::string sub, StrArg(name, a[0]));
  if (name == "count") return Value::Int(text::Count(s, sub));
  size_t hit = name == "find" ? s.find(sub) : s.rfind(sub);
  if (hit == std::string::npos) return Value::Int(-1);
  return Value::Int(static_cast<int64_t>(text::Length(std::string_view(s).substr(0, hit))));
}

absl::StatusOr<Value> JoinMethod(const std::string& s, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"iterable"}, 1));
  PKV_ASSIGN_OR_RETURN(ValueList items, Iterate(a[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found"));
    }
    if (i > 0) out += s;
    out += items[i].str();
    if (out.size() > kMaxValueBytes) {
      return absl::ResourceExhaustedError("chat template: value too large");
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> StrMethod(const std::string& s, std::string_view name, const CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"chars"}, 0));
    PKV_ASSIGN_OR_RETURN(auto chars, OptStr(name, a[0]));
    return Value::String(text::Strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sep", "maxsplit"}, 0));
    PKV_ASSIGN_OR_RETURN(auto sep, OptStr(name, a[0]));
    if (sep && sep->empty()) return absl::InvalidArgumentError("empty separator");
    int64_t maxsplit = -1;
    if (!a[1].is_undefined()) {
      PKV_ASSIGN_OR_RETURN(maxsplit, IntArg(name, a[1]));
    }
    return StrListOf(text::Split(s, sep, maxsplit));
  }
  if (name == "startswith" || name == "endswith") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"prefix"}, 1));
    return AffixTest(name, s, a[0]);
  }
  if (name == "replace") return ReplaceMethod(s, args);
  if (name == "find" || name == "rfind" || name == "count") return SearchMethod(s, name, args);
  if (name == "join") return JoinMethod(s, args);
  if (name == "format") return Format(s, args);
  PKV_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  return PlainStrMethod(s, name);
}

absl::StatusOr<Value> DictMethod(const Value& self, std::string_view name, const CallArgs& args) {
  const ValueDict& d = self.dict();
  if (name == "get") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"key", "default"}, 1));
    const Value* found = a[0].is_string() ? d.Find(a[0].str()) : nullptr;
    if (found) return *found;
    return a[1].is_undefined() ? Value::None() : a[1];
  }
  if (name == "items" || name == "keys" || name == "values") {
    PKV_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
    ValueList out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") {
        out.push_back(Value::List({Value::String(k), v}, /*is_tuple=*/true));
      } else {
        out.push_back(name == "keys" ? Value::String(k) : v);
      }
    }
    return Value::List(std::move(out));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("access to attribute '", std::string(name), "' of 'dict' object is unsafe"));
}

absl::StatusOr<Value> ListMethod(const Value& self, std::string_view name, const CallArgs& args) {
  if (name == "index" || name == "count") {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"value"}, 1));
    int64_t n = 0;
    for (size_t i = 0; i < self.list().size(); ++i) {
      if (!ValuesEqual(self.list()[i], a[0])) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") return absl::InvalidArgumentError("list.index(x): x not in list");
    return Value::Int(n);
  }
  return absl::InvalidArgumentError(absl::StrCat("access to attribute '", std::string(name),
                                                 "' of '", self.TypeName(), "' object is unsafe"));
}

}  // namespace

bool HasMethod(const Value& self, std::string_view name) {
  if (self.is_string()) return In(kStrMethods, name);
  if (self.is_dict() && !self.is_namespace()) return In(kDictMethods, name);
  if (self.is_list()) return In(kListMethods, name);
  return false;
}

absl::StatusOr<Value> CallMethod(const Value& self, std::string_view name, const CallArgs& args) {
  if (self.is_string()) return StrMethod(self.str(), name, args);
  if (self.is_dict()) return DictMethod(self, name, args);
  return ListMethod(self, name, args);
}

}  // namespace pkv::chat
