#include "chat_template/builtins.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "chat_template/call_args.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

constexpr char kRaisedPayload[] = "pkv.chat/raise_exception";

absl::StatusOr<Value> Range(const CallArgs& args) {
  PKV_ASSIGN_OR_RETURN(auto a, BindArgs("range", args, {"start", "stop", "step"}, 1));
  int64_t start = 0, stop, step = 1;
  if (a[1].is_undefined()) {
    PKV_ASSIGN_OR_RETURN(stop, IntArg("range", a[0]));
  } else {
    PKV_ASSIGN_OR_RETURN(start, IntArg("range", a[0]));
    PKV_ASSIGN_OR_RETURN(stop, IntArg("range", a[1]));
    if (!a[2].is_undefined()) {
      PKV_ASSIGN_OR_RETURN(step, IntArg("range", a[2]));
    }
  }
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  // Count without overflow: long double holds the span of two int64s exactly enough here.
  long double span =
      step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  long double n = span <= 0 ? 0
                            : (span + std::abs(static_cast<long double>(step)) - 1) /
                                  std::abs(static_cast<long double>(step));
  if (n > kMaxRange) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: range too big (the sandbox allows ", kMaxRange, " items)"));
  }
  ValueList out;
  for (int64_t i = 0, v = start; i < static_cast<int64_t>(n); ++i, v += step) {
    out.push_back(Value::Int(v));
  }
  return Value::List(std::move(out));
}

// dict(**kw) / namespace(mapping?, **kw).
absl::StatusOr<Value> MakeDict(const CallArgs& args, bool is_namespace) {
  Value out = Value::EmptyDict(is_namespace);
  if (args.positional.size() > 1 || (!is_namespace && !args.positional.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat(is_namespace ? "namespace" : "dict", "() takes keyword arguments only"));
  }
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_dict()) return absl::InvalidArgumentError("namespace() expects a mapping");
    for (const auto& [k, v] : init.dict().items) out.dict().Set(k, v);
  }
  for (const auto& [k, v] : args.keyword) out.dict().Set(k, v);
  if (!is_namespace) return Value::Dict(std::make_shared<ValueDict>(out.dict()));  // depth
  return out;
}

}  // namespace

absl::Status RaisedError(std::string msg) {
  absl::Status status = absl::InvalidArgumentError(msg);
  status.SetPayload(kRaisedPayload, absl::Cord("1"));
  return status;
}

bool IsRaisedError(const absl::Status& status) {
  return status.GetPayload(kRaisedPayload).has_value();
}

void AddBuiltins(absl::Time now, ValueDict* globals) {
  globals->Set("range", Value::Callable("range", [](CallArgs& args) { return Range(args); }));
  globals->Set("dict",
               Value::Callable("dict", [](CallArgs& args) { return MakeDict(args, false); }));
  globals->Set("namespace",
               Value::Callable("namespace", [](CallArgs& args) { return MakeDict(args, true); }));
  globals->Set("raise_exception",
               Value::Callable("raise_exception", [](CallArgs& args) -> absl::StatusOr<Value> {
                 PKV_ASSIGN_OR_RETURN(auto a, BindArgs("raise_exception", args, {"message"}, 1));
                 return RaisedError(a[0].ToStr());
               }));
  globals->Set("strftime_now",
               Value::Callable("strftime_now", [now](CallArgs& args) -> absl::StatusOr<Value> {
                 PKV_ASSIGN_OR_RETURN(auto a, BindArgs("strftime_now", args, {"format"}, 1));
                 PKV_ASSIGN_OR_RETURN(std::string fmt, StrArg("strftime_now", a[0]));
                 return Value::String(absl::FormatTime(fmt, now, absl::LocalTimeZone()));
               }));
}

}  // namespace pkv::chat
