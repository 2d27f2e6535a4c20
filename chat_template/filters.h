// Jinja filters (`value | name(args)`) with jinja2's semantics, tojson as transformers overrides
// it. Text: trim, upper, lower, title, capitalize, replace, indent, center, wordcount, string,
// safe, escape/e, default/d. Numbers: int, float, round, abs. Sequences: length/count, first,
// last, join, list, items, reverse, unique, sort, min, max, sum, map, select, reject, selectattr,
// rejectattr. JSON: tojson. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat {

// INVALID_ARGUMENT for an unknown filter, bad arguments, or a value the filter cannot take.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& value, const CallArgs& args);

}  // namespace pkv::chat
