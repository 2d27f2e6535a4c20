// Jinja lexer: template source -> tokens, with jinja2's whitespace rules as Hugging Face
// transformers configures them (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//   - "\r\n" and "\r" become "\n"; one trailing newline of the source is dropped;
//   - {%- / {{- / {#- strip all whitespace before the tag, -%} / -}} / -#} all after it;
//   - lstrip_blocks: spaces and tabs between a line start and {% or {# are removed (not {%+);
//   - trim_blocks: the first "\n" after %} or #} is removed (not after +%}).
// Comments produce no tokens. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pkv::chat {

enum class TokenType {
  kText,        // literal template text (already whitespace-processed)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInt,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { }
  kEof,
};

struct Token {
  TokenType type;
  std::string text;
  int line = 1;
  int col = 1;
};

// INVALID_ARGUMENT "chat template: line L col C: ..." on an unterminated tag, string or comment, or
// a character that starts no token.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace pkv::chat
