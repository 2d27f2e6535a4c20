// Jinja parser: tokens -> syntax tree. Supports the subset real chat templates use (see
// template.h); anything else is a syntax error naming line and column, never a crash: nesting of
// expressions and blocks is bounded (kMaxParseDepth). Pure function; thread-safe.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "chat_template/ast.h"
#include "chat_template/lexer.h"

namespace pkv::chat {

inline constexpr int kMaxParseDepth = 200;

// INVALID_ARGUMENT "chat template: line L col C: ..." on a syntax error or an unsupported tag.
absl::StatusOr<StmtList> Parse(const std::vector<Token>& tokens);

}  // namespace pkv::chat
