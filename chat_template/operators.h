// Python semantics of Jinja's binary operators on runtime values: arithmetic (+ - * / // % **)
// with int overflow reported instead of wrapping, ~ (concatenation of str()), comparisons, and
// (not) in. Errors are INVALID_ARGUMENT with Python's wording (the caller adds the line); an
// undefined operand is an error wherever jinja2's Undefined raises. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat {

// Strings or lists longer than this (bytes or items) are refused: templates cannot build
// unbounded values ("a" * 10**9).
inline constexpr size_t kMaxValueBytes = 64 << 20;

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b);

// a < b etc. for numbers, strings and lists; INVALID_ARGUMENT for other pairs.
absl::StatusOr<bool> LessThan(const Value& a, const Value& b);

// `needle in haystack`.
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle);

// The items `for x in v` visits: list items, dict keys, a string's characters; undefined is empty.
absl::StatusOr<ValueList> Iterate(const Value& v);

}  // namespace pkv::chat
