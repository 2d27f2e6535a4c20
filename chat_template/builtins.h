// The global functions a chat template can call, as transformers provides them: range (capped
// at 100000 items like jinja2's sandbox), dict, namespace, raise_exception, strftime_now.
// Thread-safe: every Render builds its own globals.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chat_template/value.h"

namespace pkv::chat {

// jinja2's sandbox MAX_RANGE.
inline constexpr int64_t kMaxRange = 100000;

// Adds the builtins to `globals`; strftime_now formats `now` in the local time zone (TZ), as
// Python's datetime.now() does.
void AddBuiltins(absl::Time now, ValueDict* globals);

// The error raise_exception(msg) produces: INVALID_ARGUMENT with msg verbatim, marked so that
// the evaluator does not prefix a line number.
absl::Status RaisedError(std::string msg);
bool IsRaisedError(const absl::Status& status);

}  // namespace pkv::chat
