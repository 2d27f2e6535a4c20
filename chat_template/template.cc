#include "chat_template/template.h"

#include "chat_template/ast.h"
#include "chat_template/evaluator.h"
#include "chat_template/lexer.h"
#include "chat_template/parser.h"
#include "common/status_macros.h"

namespace pkv::chat {

absl::StatusOr<ChatTemplate> ChatTemplate::Compile(std::string_view source) {
  PKV_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  PKV_ASSIGN_OR_RETURN(StmtList program, Parse(tokens));
  return ChatTemplate(std::make_shared<const StmtList>(std::move(program)));
}

absl::StatusOr<std::string> ChatTemplate::Render(const pkv::JsonValue& context,
                                                 const RenderOptions& options) const {
  if (!context.is_object()) {
    return absl::InvalidArgumentError("chat template: the context must be a JSON object");
  }
  Evaluator evaluator(Value::FromJson(context), options.now, EvaluatorLimits());
  return evaluator.Run(*program_);
}

}  // namespace pkv::chat
