// The recursive-descent parser shared by parser.cc (statements) and parse_expression.cc
// (expressions). Internal to chat_template; use Parse() from parser.h.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat_template/ast.h"
#include "chat_template/lexer.h"

namespace pkv::chat::internal {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  // Parses statements until EOF (end_tags empty) or until a block whose first name is one of
  // end_tags; *stopped_at receives that name, the block's "{%" and name are consumed.
  absl::StatusOr<StmtList> ParseBody(const std::vector<std::string_view>& end_tags,
                                     std::string* stopped_at);

  // Expressions (parse_expression.cc).
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition = true);
  absl::StatusOr<ExprPtr> ParseTupleOrExpression(bool with_condition);

 private:
  const Token& Peek(int ahead = 0) const;
  const Token& Next();
  bool IsOp(std::string_view op, int ahead = 0) const;
  bool IsName(std::string_view name, int ahead = 0) const;
  absl::Status Expect(std::string_view op);
  absl::Status ExpectBlockEnd();
  absl::Status Error(const Token& at, std::string_view what) const;
  absl::Status Enter();
  void Leave() { --depth_; }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseBlock(std::string* end_tag);
  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf(int line);
  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor(int line);
  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet(int line);
  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro(int line);
  absl::StatusOr<std::unique_ptr<Stmt>> ParseFilterBlock(int line);
  absl::StatusOr<std::string> ExpectName();

  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseSequence(std::string_view close, Expr::Kind kind, int line);
  absl::StatusOr<ExprPtr> ParseDictLiteral(int line);
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterAndTests(ExprPtr node);
  absl::Status ParseCallArgs(Expr* call);

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

ExprPtr MakeExpr(Expr::Kind kind, int line);

}  // namespace pkv::chat::internal
