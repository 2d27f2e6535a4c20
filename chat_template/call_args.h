// Binding of call arguments to a native function's parameters, Python style: positional first,
// then keywords by name; a parameter left unbound reads as undefined so the callee applies its
// default. Pure function; thread-safe.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat_template/value.h"

namespace pkv::chat {

// INVALID_ARGUMENT "<fn>() ..." for too many arguments, unknown or repeated keywords, or fewer
// than `required` parameters bound.
absl::StatusOr<std::vector<Value>> BindArgs(std::string_view fn, const CallArgs& args,
                                            std::initializer_list<std::string_view> params,
                                            size_t required);

// An int argument (bools count, as in Python), or INVALID_ARGUMENT naming the function.
absl::StatusOr<int64_t> IntArg(std::string_view fn, const Value& v);
// A str argument, or INVALID_ARGUMENT naming the function.
absl::StatusOr<std::string> StrArg(std::string_view fn, const Value& v);

}  // namespace pkv::chat
