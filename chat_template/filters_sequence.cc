// Sequence filters: length/count, first, last, join, list, items, reverse, unique, sort, min,
// max, sum, map, select, reject, selectattr, rejectattr.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chat_template/call_args.h"
#include "chat_template/filters.h"
#include "chat_template/filters_internal.h"
#include "chat_template/jinja_tests.h"
#include "chat_template/operators.h"
#include "chat_template/text.h"
#include "common/status_macros.h"

namespace pkv::chat::internal {
namespace {

absl::StatusOr<Value> Length(const Value& value) {
  if (value.is_string()) return Value::Int(static_cast<int64_t>(text::Length(value.str())));
  if (value.is_list()) return Value::Int(static_cast<int64_t>(value.list().size()));
  if (value.is_dict() && !value.is_namespace()) {
    return Value::Int(static_cast<int64_t>(value.dict().items.size()));
  }
  if (value.is_undefined()) return Value::Int(0);
  return absl::InvalidArgumentError(
      absl::StrCat("object of type '", value.TypeName(), "' has no len()"));
}

// Case-folded sort/unique key: strings lower-cased unless case_sensitive.
Value Key(const Value& v, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_undefined() ? v : GetAttributePath(v, attribute.ToStr());
  if (!case_sensitive && k.is_string()) return Value::String(text::Lower(k.str()));
  return k;
}

absl::StatusOr<Value> Join(const ValueList& items, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"d", "attribute"}, 0));
  std::string sep = a[0].is_undefined() ? "" : a[0].ToStr();
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += (a[1].is_undefined() ? items[i] : GetAttributePath(items[i], a[1].ToStr())).ToStr();
    if (out.size() > kMaxValueBytes)
      return absl::ResourceExhaustedError("chat template: value too large");
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Sort(ValueList items, std::string_view name, const CallArgs& args) {
  bool is_sort = name == "sort";
  PKV_ASSIGN_OR_RETURN(auto a,
                       is_sort ? BindArgs(name, args, {"reverse", "case_sensitive", "attribute"}, 0)
                               : BindArgs(name, args, {"case_sensitive", "attribute"}, 0));
  if (!is_sort) a.insert(a.begin(), Value::Bool(false));
  bool case_sensitive = a[1].Truthy();
  absl::Status error;
  auto less = [&](const Value& x, const Value& y) {
    absl::StatusOr<bool> r = LessThan(Key(x, a[2], case_sensitive), Key(y, a[2], case_sensitive));
    if (!r.ok()) error = r.status();
    return r.value_or(false);
  };
  if (name == "unique") {
    // Python hashes the keys (a set), so this stays linear; lists and dicts are unhashable.
    std::unordered_set<std::string> seen;
    ValueList out;
    for (const Value& v : items) {
      Value k = Key(v, a[2], case_sensitive);
      if (k.is_list() || (k.is_dict() && !k.is_namespace())) {
        return absl::InvalidArgumentError(absl::StrCat("unhashable type: '", k.TypeName(), "'"));
      }
      // 1, 1.0 and True are one key in Python.
      std::string h = k.is_number() && k.float_value() == std::floor(k.float_value())
                          ? absl::StrCat("n", PyFloatRepr(k.float_value()))
                          : absl::StrCat(k.TypeName(), ":", k.ToRepr());
      if (seen.insert(std::move(h)).second) out.push_back(v);
    }
    return Value::List(std::move(out));
  }
  if (items.empty() && name != "sort") return Value();
  if (name == "min") return *std::min_element(items.begin(), items.end(), less);
  if (name == "max") return *std::max_element(items.begin(), items.end(), less);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return a[0].Truthy() ? less(y, x) : less(x, y);
  });
  PKV_RETURN_IF_ERROR(error);
  return Value::List(std::move(items));
}

// select/reject/selectattr/rejectattr.
absl::StatusOr<Value> Select(std::string_view name, const ValueList& items, const CallArgs& args) {
  bool by_attr = name == "selectattr" || name == "rejectattr";
  bool keep_if = name == "select" || name == "selectattr";
  std::vector<Value> rest = args.positional;
  std::string attr;
  if (by_attr) {
    if (rest.empty())
      return absl::InvalidArgumentError(absl::StrCat(std::string(name), "() needs an attribute"));
    attr = rest[0].ToStr();
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = rest[0].ToStr();
    rest.erase(rest.begin());
  }
  ValueList out;
  for (const Value& item : items) {
    Value v = by_attr ? GetAttributePath(item, attr) : item;
    bool pass = v.Truthy();
    if (!test.empty()) {
      PKV_ASSIGN_OR_RETURN(pass, ApplyTest(test, v, rest));
    }
    if (pass == keep_if) out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Map(const ValueList& items, const CallArgs& args) {
  ValueList out;
  if (args.positional.empty()) {
    PKV_ASSIGN_OR_RETURN(auto a, BindArgs("map", args, {"attribute", "default"}, 1));
    for (const Value& item : items) {
      Value v = GetAttributePath(item, a[0].ToStr());
      out.push_back(v.is_undefined() && !a[1].is_undefined() ? a[1] : v);
    }
    return Value::List(std::move(out));
  }
  CallArgs rest = args;
  std::string filter = rest.positional[0].ToStr();
  rest.positional.erase(rest.positional.begin());
  for (const Value& item : items) {
    PKV_ASSIGN_OR_RETURN(Value v, ApplyFilter(filter, item, rest));
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> Sum(const ValueList& items, const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("sum", args, {"attribute", "start"}, 0));
  Value total = a[1].is_undefined() ? Value::Int(0) : a[1];
  for (const Value& item : items) {
    Value v = a[0].is_undefined() ? item : GetAttributePath(item, a[0].ToStr());
    PKV_ASSIGN_OR_RETURN(total, BinaryOp("+", total, v));
  }
  return total;
}

}  // namespace

Value GetAttributePath(const Value& value, std::string_view path) {
  Value cur = value;
  std::vector<std::string> parts = absl::StrSplit(std::string(path), '.');
  for (const std::string& part : parts) {
    int64_t index;
    if (cur.is_dict() && cur.dict().Find(part) != nullptr) {
      cur = *cur.dict().Find(part);
    } else if (cur.is_list() && absl::SimpleAtoi(part, &index) && index >= 0 &&
               index < static_cast<int64_t>(cur.list().size())) {
      cur = cur.list()[index];
    } else {
      return Value();
    }
  }
  return cur;
}

absl::StatusOr<Value> ApplySequenceFilter(std::string_view name, const Value& value,
                                          const CallArgs& args) {
  if (name == "length" || name == "count") {
    PKV_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
    return Length(value);
  }
  if (name == "items") {
    if (value.is_undefined()) return Value::List({});
    if (!value.is_dict() || value.is_namespace()) {
      return absl::InvalidArgumentError("items(): can only get item pairs from a mapping");
    }
    ValueList out;
    for (const auto& [k, v] : value.dict().items) {
      out.push_back(Value::List({Value::String(k), v}, /*is_tuple=*/true));
    }
    return Value::List(std::move(out));
  }
  static constexpr std::string_view kNames[] = {
      "first", "last", "join", "list",   "reverse", "unique",     "sort",      "min",
      "max",   "sum",  "map",  "select", "reject",  "selectattr", "rejectattr"};
  if (std::find(std::begin(kNames), std::end(kNames), name) == std::end(kNames)) {
    return absl::NotFoundError(std::string(name));
  }
  PKV_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
  if (name == "first" || name == "last" || name == "list" || name == "reverse") {
    PKV_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
    if (name == "first") return items.empty() ? Value() : items.front();
    if (name == "last") return items.empty() ? Value() : items.back();
    if (name == "reverse") {
      std::reverse(items.begin(), items.end());
      if (value.is_string()) return Join(items, CallArgs());
    }
    return Value::List(std::move(items));
  }
  if (name == "join") return Join(items, args);
  if (name == "map") return Map(items, args);
  if (name == "sum") return Sum(items, args);
  if (name == "unique" || name == "sort" || name == "min" || name == "max") {
    return Sort(std::move(items), name, args);
  }
  return Select(name, items, args);
}

}  // namespace pkv::chat::internal
