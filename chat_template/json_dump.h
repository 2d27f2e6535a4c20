// tojson as Hugging Face transformers defines it: Python's json.dumps(value, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys). Non-ASCII text is written as is;
// floats as Python's repr (NaN, Infinity); separators default to (", ", ": "), or (",", ": ")
// when indenting; an indent of 0 or "" still breaks lines. Pure function; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // nullopt: one line
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// INVALID_ARGUMENT "Object of type T is not JSON serializable" for undefined, functions and
// namespaces.
absl::StatusOr<std::string> JsonDump(const Value& value, const JsonDumpOptions& options);

// Python json string literal with ensure_ascii=False.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace pkv::chat
