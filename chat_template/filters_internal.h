// Shared between filters.cc (text and number filters, dispatch) and filters_sequence.cc.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat::internal {

// Sequence filters; nullopt-like NOT_FOUND status when `name` is not one of them.
absl::StatusOr<Value> ApplySequenceFilter(std::string_view name, const Value& value,
                                          const CallArgs& args);

// jinja2's make_attrgetter: "a.b.0" looked up item by item; missing -> undefined.
Value GetAttributePath(const Value& value, std::string_view path);

}  // namespace pkv::chat::internal
