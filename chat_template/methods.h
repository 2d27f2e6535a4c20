// Python methods callable on template values: str (strip/lstrip/rstrip, split, startswith,
// endswith, upper, lower, title, capitalize, replace, find, rfind, count, join, splitlines,
// isdigit, isspace), dict (items, keys, values, get) and list (index, count). Methods that would
// mutate a list or dict are refused, as jinja2's ImmutableSandboxedEnvironment (the environment
// transformers renders with) refuses them. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat {

// True when `self.name` is a method (so `.name` on a dict does not read the key "name").
bool HasMethod(const Value& self, std::string_view name);

// REQUIRES: HasMethod(self, name).
absl::StatusOr<Value> CallMethod(const Value& self, std::string_view name, const CallArgs& args);

}  // namespace pkv::chat
