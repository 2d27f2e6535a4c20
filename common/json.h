// A small JSON reader (RFC 8259) for model files: config.json, generation_config.json,
// tokenizer.json, safetensors headers. Builds a DOM; never throws; rejects malformed input with
// INVALID_ARGUMENT naming the byte offset. Nesting is limited (kMaxJsonDepth) so hostile input
// cannot exhaust the stack. Strings are returned as UTF-8 (\uXXXX escapes and surrogate pairs
// decoded; lone surrogates are an error). Object members keep file order; duplicate keys are kept
// and Find() returns the first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pkv {

inline constexpr int kMaxJsonDepth = 128;

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue Bool(bool b);
  static JsonValue Number(double d, bool is_integer, int64_t integer);
  static JsonValue String(std::string s);
  static JsonValue Array(std::vector<JsonValue> items);
  static JsonValue Object(std::vector<Member> members);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  // A number written without fraction/exponent that fits int64.
  bool is_integer() const { return type_ == Type::kNumber && is_integer_; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool bool_value() const { return bool_; }
  double number() const { return number_; }
  int64_t integer() const { return integer_; }
  const std::string& str() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }

  // Object member lookup (first match); nullptr when absent or when this is not an object.
  const JsonValue* Find(std::string_view key) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

absl::StatusOr<JsonValue> ParseJson(std::string_view text);

// Typed accessors for config-style objects: INVALID_ARGUMENT "<context>: field 'name' ..." when
// the field is missing (the *Or variants return the default) or has the wrong type.
absl::StatusOr<int64_t> JsonGetInt(const JsonValue& obj, std::string_view name,
                                   std::string_view context);
absl::StatusOr<int64_t> JsonGetIntOr(const JsonValue& obj, std::string_view name, int64_t dflt,
                                     std::string_view context);
absl::StatusOr<double> JsonGetNumberOr(const JsonValue& obj, std::string_view name, double dflt,
                                       std::string_view context);
absl::StatusOr<std::string> JsonGetStringOr(const JsonValue& obj, std::string_view name,
                                            std::string_view dflt, std::string_view context);
absl::StatusOr<bool> JsonGetBoolOr(const JsonValue& obj, std::string_view name, bool dflt,
                                   std::string_view context);

}  // namespace pkv
