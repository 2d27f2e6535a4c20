#include "chat_template/jinja_tests.h"

#include "absl/strings/str_cat.h"
#include "chat_template/operators.h"
#include "chat_template/text.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

absl::StatusOr<bool> Compare(std::string_view name, const Value& a, const Value& b) {
  if (name == "eq" || name == "equalto" || name == "==") return ValuesEqual(a, b);
  if (name == "ne" || name == "!=") return !ValuesEqual(a, b);
  PKV_ASSIGN_OR_RETURN(Value v,
                       BinaryOp(name == "lt" || name == "lessthan" || name == "<"      ? "<"
                                : name == "le" || name == "<="                         ? "<="
                                : name == "gt" || name == "greaterthan" || name == ">" ? ">"
                                                                                       : ">=",
                                a, b));
  return v.bool_value();
}

bool IsCompareTest(std::string_view name) {
  for (std::string_view n : {"eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le",
                             "<=", "gt", "greaterthan", ">", "ge", ">="}) {
    if (n == name) return true;
  }
  return false;
}

absl::StatusOr<bool> Unary(std::string_view name, const Value& v) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable") {
    return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()) || v.is_undefined();
  }
  if (name == "sequence") return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && text::Lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && text::Upper(v.str()) == v.str();
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) {
      return absl::InvalidArgumentError(
          absl::StrCat("test '", std::string(name), "' needs an integer"));
    }
    bool odd = (v.int_value() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  return absl::InvalidArgumentError(absl::StrCat("no test named '", std::string(name), "'"));
}

}  // namespace

bool IsKnownTest(std::string_view name) {
  for (std::string_view n :
       {"defined", "undefined", "none",   "boolean", "true",        "false",    "integer",
        "float",   "number",    "string", "mapping", "iterable",    "sequence", "callable",
        "lower",   "upper",     "odd",    "even",    "divisibleby", "in",       "sameas"}) {
    if (n == name) return true;
  }
  return IsCompareTest(name);
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value,
                               const std::vector<Value>& args) {
  if (!IsKnownTest(std::string(name)))
    return absl::InvalidArgumentError(absl::StrCat("no test named '", std::string(name), "'"));
  bool binary = IsCompareTest(std::string(name)) || std::string(name) == "divisibleby" ||
                std::string(name) == "in" || std::string(name) == "sameas";
  if (args.size() != (binary ? 1u : 0u)) {
    return absl::InvalidArgumentError(
        absl::StrCat("test '", std::string(name), "' takes ", binary ? 1 : 0, " argument(s)"));
  }
  if (!binary) return Unary(name, value);
  const Value& arg = args[0];
  if (IsCompareTest(name)) return Compare(name, value, arg);
  if (name == "in") return Contains(arg, value);
  if (name == "sameas") {
    // Python `is`: scalars of one type and value are the same object (small ints and short
    // strings are cached), containers only when they are the same container.
    if (value.kind() != arg.kind()) return false;
    if (value.is_dict()) return &value.dict() == &arg.dict();
    if (value.is_list()) return &value.list() == &arg.list();
    return ValuesEqual(value, arg);
  }
  // divisibleby
  PKV_ASSIGN_OR_RETURN(Value rem, BinaryOp("%", value, arg));
  return !rem.Truthy();
}

}  // namespace pkv::chat
