// Jinja tests (`value is name(args)`) with jinja2's semantics: defined, undefined, none, boolean,
// true, false, integer, float, number, string, mapping, iterable, sequence, callable, odd, even,
// divisibleby, eq/equalto/==, ne/!=, lt/<, le/<=, gt/>, ge/>=, in, sameas, lower, upper.
// Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat {

bool IsKnownTest(std::string_view name);

// INVALID_ARGUMENT for an unknown test or bad arguments.
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value,
                               const std::vector<Value>& args);

}  // namespace pkv::chat
