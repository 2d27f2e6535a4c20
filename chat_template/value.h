// The Jinja runtime value: Python's object model cut down to what chat templates use. Lists and
// dicts are shared (a copy of a Value aliases the same container), which gives namespace objects
// their reference semantics; the sandbox we mirror (jinja2's ImmutableSandboxedEnvironment) never
// mutates lists or dicts, so sharing them is safe. Dicts keep insertion order, as Python's do.
// Strings are UTF-8. Not thread-safe: a Value graph belongs to one Render call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace pkv::chat {

// Values built by a template nest at most this deep (printing and tojson recurse).
inline constexpr int kMaxValueDepth = 256;

class Value;
using ValueList = std::vector<Value>;
struct ValueDict;

// Arguments of a call: positional then keyword, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using NativeFunction = std::function<absl::StatusOr<Value>(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(ValueList items, bool is_tuple = false);
  static Value Dict(std::shared_ptr<ValueDict> dict);
  static Value EmptyDict(bool is_namespace = false);
  static Value Callable(std::string name, NativeFunction fn);
  static Value FromJson(const JsonValue& json);

  Kind kind() const { return kind_; }
  // Nesting depth of lists and dicts (0 for scalars); namespaces count as scalars.
  int depth() const { return depth_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers.Number: bool, int and float.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && is_tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const;
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool bool_value() const { return int_ != 0; }
  int64_t int_value() const { return int_; }  // also bools (0/1)
  double float_value() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *str_; }
  const ValueList& list() const { return *list_; }
  ValueDict& dict() const { return *dict_; }
  const std::string& callable_name() const { return *str_; }
  const NativeFunction& function() const { return *fn_; }

  // Python truthiness (undefined is falsy).
  bool Truthy() const;
  // Python str(): what {{ value }} prints. Undefined prints as "".
  std::string ToStr() const;
  // Python repr(), used for items inside printed lists and dicts.
  std::string ToRepr() const;
  // Python's type name, for error messages.
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool is_tuple_ = false;
  int depth_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<const NativeFunction> fn_;
};

// An insertion-ordered dict with string keys (JSON objects, dict literals, namespace objects).
struct ValueDict {
  bool is_namespace = false;
  std::vector<std::pair<std::string, Value>> items;

  // nullptr when absent.
  const Value* Find(std::string_view key) const;
  // Replaces the value of an existing key or appends the key.
  void Set(std::string key, Value value);
};

// Python ==, deep for lists and dicts; 1 == 1.0 == True.
bool ValuesEqual(const Value& a, const Value& b);

// Python float repr: shortest round-trip digits, "1.0", "1e+16", "inf", "nan".
std::string PyFloatRepr(double d);

// Python repr() of a str: single quotes unless the text has ' and no ".
std::string PyStringRepr(std::string_view s);

}  // namespace pkv::chat
