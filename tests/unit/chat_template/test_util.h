// Helpers for chat_template unit tests: compile + render in one call.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "chat_template/template.h"
#include "common/json.h"

namespace pkv::chat::testing {

// Compiles `source` and renders it with the variables in `context_json` (a JSON object).
inline absl::StatusOr<std::string> RenderText(std::string_view source,
                                              std::string_view context_json = "{}",
                                              const RenderOptions& options = {}) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::Compile(source);
  if (!tmpl.ok()) return tmpl.status();
  absl::StatusOr<JsonValue> context = ParseJson(context_json);
  if (!context.ok()) return context.status();
  return tmpl->Render(*context, options);
}

// The rendered text, or "ERROR: <message>" so a failing expectation shows the error.
inline std::string R(std::string_view source, std::string_view context_json = "{}") {
  absl::StatusOr<std::string> out = RenderText(source, context_json);
  return out.ok() ? *out : "ERROR: " + std::string(out.status().message());
}

}  // namespace pkv::chat::testing
