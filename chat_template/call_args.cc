#include "chat_template/call_args.h"

#include "absl/strings/str_cat.h"

namespace pkv::chat {

absl::StatusOr<std::vector<Value>> BindArgs(std::string_view fn, const CallArgs& args,
                                            std::initializer_list<std::string_view> params,
                                            size_t required) {
  std::vector<Value> bound(params.size());
  std::vector<bool> set(params.size(), false);
  if (args.positional.size() > params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(fn), "() takes at most ",
                                                   params.size(), " arguments (",
                                                   args.positional.size(), " given)"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bound[i] = args.positional[i];
    set[i] = true;
  }
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == name) break;
      ++i;
    }
    if (i == params.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(fn), "() got an unexpected keyword argument '", std::string(name), "'"));
    }
    if (set[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(fn), "() got multiple values for argument '", std::string(name), "'"));
    }
    bound[i] = value;
    set[i] = true;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!set[i]) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(fn),
                                                     "() missing required argument '",
                                                     std::string(*(params.begin() + i)), "'"));
    }
  }
  return bound;
}

absl::StatusOr<int64_t> IntArg(std::string_view fn, const Value& v) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(fn), "(): expected an integer, got '", v.TypeName(), "'"));
}

absl::StatusOr<std::string> StrArg(std::string_view fn, const Value& v) {
  if (v.is_string()) return v.str();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(fn), "(): expected a string, got '", v.TypeName(), "'"));
}

}  // namespace pkv::chat
