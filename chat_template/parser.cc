// Statements: text, {{ output }}, and the block tags if/for/set/macro/break/continue/generation.
#include "chat_template/parser.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "chat_template/parser_internal.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace internal {

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

namespace {
std::unique_ptr<Stmt> MakeStmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}
}  // namespace

const Token& Parser::Peek(int ahead) const {
  size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
  return tokens_[i];
}
const Token& Parser::Next() {
  const Token& t = Peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  return t;
}
bool Parser::IsOp(std::string_view op, int ahead) const {
  return Peek(ahead).type == TokenType::kOperator && Peek(ahead).text == op;
}
bool Parser::IsName(std::string_view name, int ahead) const {
  return Peek(ahead).type == TokenType::kName && Peek(ahead).text == name;
}
absl::Status Parser::Error(const Token& at, std::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template: line ", at.line, " col ", at.col, ": ", std::string(what)));
}
absl::Status Parser::Expect(std::string_view op) {
  if (!IsOp(std::string(op)))
    return Error(Peek(), absl::StrCat("expected '", std::string(op), "'"));
  Next();
  return absl::OkStatus();
}
absl::Status Parser::ExpectBlockEnd() {
  if (Peek().type != TokenType::kBlockEnd) return Error(Peek(), "expected end of block tag '%}'");
  Next();
  return absl::OkStatus();
}
absl::Status Parser::Enter() {
  if (++depth_ > kMaxParseDepth) return Error(Peek(), "nesting too deep");
  return absl::OkStatus();
}
absl::StatusOr<std::string> Parser::ExpectName() {
  if (Peek().type != TokenType::kName) return Error(Peek(), "expected a name");
  return Next().text;
}

absl::StatusOr<StmtList> Parser::ParseBody(const std::vector<std::string_view>& end_tags,
                                           std::string* stopped_at) {
  StmtList body;
  while (true) {
    const Token& t = Peek();
    switch (t.type) {
      case TokenType::kText: {
        auto s = MakeStmt(Stmt::Kind::kText, t.line);
        s->text = Next().text;
        body.push_back(std::move(s));
        break;
      }
      case TokenType::kVarBegin: {
        Next();
        auto s = MakeStmt(Stmt::Kind::kOutput, t.line);
        PKV_ASSIGN_OR_RETURN(s->expr, ParseTupleOrExpression(true));
        if (Peek().type != TokenType::kVarEnd) return Error(Peek(), "expected '}}'");
        Next();
        body.push_back(std::move(s));
        break;
      }
      case TokenType::kBlockBegin: {
        const Token& name = Peek(1);
        if (name.type == TokenType::kName &&
            std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
          *stopped_at = name.text;
          Next();
          Next();
          return body;
        }
        PKV_RETURN_IF_ERROR(Enter());
        PKV_ASSIGN_OR_RETURN(auto s, ParseBlock(stopped_at));
        Leave();
        body.push_back(std::move(s));
        break;
      }
      case TokenType::kEof:
        if (!end_tags.empty()) {
          return Error(t, absl::StrCat("unexpected end of template; expected '",
                                       std::string(end_tags.back()), "'"));
        }
        return body;
      default:
        return Error(t, "unexpected token");
    }
  }
}

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseBlock(std::string* end_tag) {
  Next();  // {%
  const Token& name = Peek();
  if (name.type != TokenType::kName) return Error(name, "expected a tag name");
  Next();
  int line = name.line;
  if (name.text == "if") return ParseIf(line);
  if (name.text == "for") return ParseFor(line);
  if (name.text == "set") return ParseSet(line);
  if (name.text == "macro") return ParseMacro(line);
  if (name.text == "filter") return ParseFilterBlock(line);
  if (name.text == "break" || name.text == "continue") {
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    return MakeStmt(name.text == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
  }
  if (name.text == "generation") {  // transformers' AssistantTracker: renders its body
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    auto s = MakeStmt(Stmt::Kind::kIf, line);
    auto always = MakeExpr(Expr::Kind::kLiteral, line);
    always->value = Value::Bool(true);
    s->conditions.push_back(std::move(always));
    PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"endgeneration"}, end_tag));
    s->bodies.push_back(std::move(body));
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }
  return Error(name, absl::StrCat("unsupported or unexpected tag '", name.text, "'"));
}

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseIf(int line) {
  auto s = MakeStmt(Stmt::Kind::kIf, line);
  std::string tag = "if";
  while (tag == "if" || tag == "elif") {
    PKV_ASSIGN_OR_RETURN(ExprPtr cond, ParseExpression());
    s->conditions.push_back(std::move(cond));
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"elif", "else", "endif"}, &tag));
    s->bodies.push_back(std::move(body));
  }
  if (tag == "else") {
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"endif"}, &tag));
    s->bodies.push_back(std::move(body));
  }
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseFor(int line) {
  auto s = MakeStmt(Stmt::Kind::kFor, line);
  bool paren = IsOp("(");
  if (paren) Next();
  do {
    PKV_ASSIGN_OR_RETURN(std::string target, ExpectName());
    s->targets.push_back(std::move(target));
  } while (IsOp(",") && (Next(), true));
  if (paren) PKV_RETURN_IF_ERROR(Expect(")"));
  if (!IsName("in")) return Error(Peek(), "expected 'in'");
  Next();
  PKV_ASSIGN_OR_RETURN(s->expr, ParseTupleOrExpression(false));
  if (IsName("if")) {
    Next();
    PKV_ASSIGN_OR_RETURN(s->filter, ParseExpression());
  }
  if (IsName("recursive")) return Error(Peek(), "recursive loops are not supported");
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string tag;
  PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"else", "endfor"}, &tag));
  s->bodies.push_back(std::move(body));
  if (tag == "else") {
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    PKV_ASSIGN_OR_RETURN(StmtList else_body, ParseBody({"endfor"}, &tag));
    s->bodies.push_back(std::move(else_body));
  }
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseSet(int line) {
  auto s = MakeStmt(Stmt::Kind::kSet, line);
  PKV_ASSIGN_OR_RETURN(std::string target, ExpectName());
  s->targets.push_back(std::move(target));
  if (IsOp(".")) {
    Next();
    PKV_ASSIGN_OR_RETURN(s->attr, ExpectName());
  } else {
    while (IsOp(",")) {
      Next();
      PKV_ASSIGN_OR_RETURN(std::string more, ExpectName());
      s->targets.push_back(std::move(more));
    }
  }
  if (IsOp("=")) {
    Next();
    PKV_ASSIGN_OR_RETURN(s->expr, ParseTupleOrExpression(true));
    PKV_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }
  if (!s->attr.empty() || s->targets.size() != 1) return Error(Peek(), "expected '='");
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string tag;
  PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"endset"}, &tag));
  s->bodies.push_back(std::move(body));
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseMacro(int line) {
  auto s = MakeStmt(Stmt::Kind::kMacro, line);
  PKV_ASSIGN_OR_RETURN(s->text, ExpectName());
  PKV_RETURN_IF_ERROR(Expect("("));
  while (!IsOp(")")) {
    PKV_ASSIGN_OR_RETURN(std::string param, ExpectName());
    s->targets.push_back(std::move(param));
    ExprPtr dflt;
    if (IsOp("=")) {
      Next();
      PKV_ASSIGN_OR_RETURN(dflt, ParseExpression());
    }
    s->conditions.push_back(std::move(dflt));
    if (!IsOp(",")) break;
    Next();
  }
  PKV_RETURN_IF_ERROR(Expect(")"));
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string tag;
  PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"endmacro"}, &tag));
  s->bodies.push_back(std::move(body));
  if (Peek().type == TokenType::kName) Next();  // {% endmacro name %}
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseFilterBlock(int line) {
  auto s = MakeStmt(Stmt::Kind::kFilterBlock, line);
  ExprPtr chain = MakeExpr(Expr::Kind::kName, line);
  chain->name = kFilterBlockInput;
  do {
    if (IsOp("|")) Next();
    ExprPtr f = MakeExpr(Expr::Kind::kFilter, Peek().line);
    PKV_ASSIGN_OR_RETURN(f->name, ExpectName());
    f->a = std::move(chain);
    if (IsOp("(")) PKV_RETURN_IF_ERROR(ParseCallArgs(f.get()));
    chain = std::move(f);
  } while (IsOp("|"));
  s->expr = std::move(chain);
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string tag;
  PKV_ASSIGN_OR_RETURN(StmtList body, ParseBody({"endfilter"}, &tag));
  s->bodies.push_back(std::move(body));
  PKV_RETURN_IF_ERROR(ExpectBlockEnd());
  return s;
}

}  // namespace internal

absl::StatusOr<StmtList> Parse(const std::vector<Token>& tokens) {
  internal::Parser parser(tokens);
  std::string unused;
  return parser.ParseBody({}, &unused);
}

}  // namespace pkv::chat
