// Expressions, with jinja2's precedence (loosest first): conditional, or, and, not, comparisons
// and (not) in, + -, ~, * / // %, **, unary - +, then primary with postfix . [] () and the
// filter/test chain (| name, is [not] name).
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chat_template/parser_internal.h"
#include "common/status_macros.h"

namespace pkv::chat::internal {
namespace {

ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, int line) {
  ExprPtr e = MakeExpr(Expr::Kind::kBinary, line);
  e->name = std::move(op);
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}

// A name, or one of the constants true/false/none (also spelled True/False/None).
ExprPtr NameOrConstant(const Token& t) {
  ExprPtr e = MakeExpr(Expr::Kind::kLiteral, t.line);
  if (t.text == "true" || t.text == "True") {
    e->value = Value::Bool(true);
  } else if (t.text == "false" || t.text == "False") {
    e->value = Value::Bool(false);
  } else if (t.text == "none" || t.text == "None") {
    e->value = Value::None();
  } else {
    e->kind = Expr::Kind::kName;
    e->name = t.text;
  }
  return e;
}

}  // namespace

absl::StatusOr<ExprPtr> Parser::ParseTupleOrExpression(bool with_condition) {
  int line = Peek().line;
  PKV_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condition));
  if (!IsOp(",")) return first;
  ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, line);
  tuple->args.push_back(std::move(first));
  while (IsOp(",")) {
    Next();
    TokenType t = Peek().type;
    if (t == TokenType::kVarEnd || t == TokenType::kBlockEnd || IsName("if") || IsOp(")")) {
      break;
    }
    PKV_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condition));
    tuple->args.push_back(std::move(item));
  }
  return tuple;
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condition) {
  PKV_RETURN_IF_ERROR(Enter());
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseOr());
  while (with_condition && IsName("if")) {
    int line = Next().line;
    ExprPtr cond = MakeExpr(Expr::Kind::kCondition, line);
    PKV_ASSIGN_OR_RETURN(cond->a, ParseOr());
    cond->b = std::move(node);
    if (IsName("else")) {
      Next();
      PKV_ASSIGN_OR_RETURN(cond->c, ParseExpression(true));
    }
    node = std::move(cond);
  }
  Leave();
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseAnd());
  while (IsName("or")) {
    int line = Next().line;
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParseAnd());
    node = Binary("or", std::move(node), std::move(rhs), line);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseNot());
  while (IsName("and")) {
    int line = Next().line;
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParseNot());
    node = Binary("and", std::move(node), std::move(rhs), line);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  int line = Next().line;
  PKV_RETURN_IF_ERROR(Enter());
  ExprPtr e = MakeExpr(Expr::Kind::kUnary, line);
  e->name = "not";
  PKV_ASSIGN_OR_RETURN(e->a, ParseNot());
  Leave();
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseMath1());
  while (true) {
    std::string op;
    if (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">=")) {
      op = Peek().text;
    } else if (IsName("in")) {
      op = "in";
    } else if (IsName("not") && IsName("in", 1)) {
      op = "not in";
      Next();
    } else {
      return node;
    }
    int line = Next().line;
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath1());
    node = Binary(op, std::move(node), std::move(rhs), line);
  }
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    const Token& op = Next();
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParseConcat());
    node = Binary(op.text, std::move(node), std::move(rhs), op.line);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseMath2());
  while (IsOp("~")) {
    int line = Next().line;
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath2());
    node = Binary("~", std::move(node), std::move(rhs), line);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const Token& op = Next();
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParsePow());
    node = Binary(op.text, std::move(node), std::move(rhs), op.line);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  PKV_ASSIGN_OR_RETURN(ExprPtr node, ParseUnary(true));
  while (IsOp("**")) {
    int line = Next().line;
    PKV_ASSIGN_OR_RETURN(ExprPtr rhs, ParseUnary(true));
    node = Binary("**", std::move(node), std::move(rhs), line);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  PKV_RETURN_IF_ERROR(Enter());
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    const Token& op = Next();
    node = MakeExpr(Expr::Kind::kUnary, op.line);
    node->name = op.text;
    PKV_ASSIGN_OR_RETURN(node->a, ParseUnary(false));
  } else {
    PKV_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  PKV_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    PKV_ASSIGN_OR_RETURN(node, ParseFilterAndTests(std::move(node)));
  }
  Leave();
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Peek();
  int line = t.line;
  if (t.type == TokenType::kName) return NameOrConstant(Next());
  if (t.type == TokenType::kString) {
    std::string s;
    while (Peek().type == TokenType::kString) s += Next().text;
    ExprPtr e = MakeExpr(Expr::Kind::kLiteral, line);
    e->value = Value::String(std::move(s));
    return e;
  }
  if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
    Next();
    ExprPtr e = MakeExpr(Expr::Kind::kLiteral, line);
    if (t.type == TokenType::kFloat) {
      e->value = Value::Float(std::strtod(t.text.c_str(), nullptr));
      return e;
    }
    int64_t i;
    if (!absl::SimpleAtoi(t.text, &i)) return Error(t, "integer literal out of range");
    e->value = Value::Int(i);
    return e;
  }
  if (IsOp("(")) {
    Next();
    if (IsOp(")")) {
      Next();
      return MakeExpr(Expr::Kind::kTuple, line);
    }
    PKV_ASSIGN_OR_RETURN(ExprPtr inner, ParseTupleOrExpression(true));
    PKV_RETURN_IF_ERROR(Expect(")"));
    return inner;
  }
  if (IsOp("[")) {
    Next();
    return ParseSequence("]", Expr::Kind::kList, line);
  }
  if (IsOp("{")) {
    Next();
    return ParseDictLiteral(line);
  }
  return Error(t, t.type == TokenType::kEof ? "unexpected end of template" : "unexpected token");
}

absl::StatusOr<ExprPtr> Parser::ParseSequence(std::string_view close, Expr::Kind kind, int line) {
  ExprPtr e = MakeExpr(kind, line);
  while (!IsOp(close)) {
    PKV_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    e->args.push_back(std::move(item));
    if (!IsOp(",")) break;
    Next();
  }
  PKV_RETURN_IF_ERROR(Expect(close));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseDictLiteral(int line) {
  ExprPtr e = MakeExpr(Expr::Kind::kDict, line);
  while (!IsOp("}")) {
    PKV_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    PKV_RETURN_IF_ERROR(Expect(":"));
    PKV_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    e->args.push_back(std::move(key));
    e->args.push_back(std::move(value));
    if (!IsOp(",")) break;
    Next();
  }
  PKV_RETURN_IF_ERROR(Expect("}"));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      int line = Next().line;
      const Token& t = Next();
      if (t.type == TokenType::kName) {
        ExprPtr e = MakeExpr(Expr::Kind::kAttribute, line);
        e->name = t.text;
        e->a = std::move(node);
        node = std::move(e);
      } else if (t.type == TokenType::kInt) {
        ExprPtr e = MakeExpr(Expr::Kind::kSubscript, line);
        e->a = std::move(node);
        e->b = MakeExpr(Expr::Kind::kLiteral, line);
        e->b->value = Value::Int(std::strtoll(t.text.c_str(), nullptr, 10));
        node = std::move(e);
      } else {
        return Error(t, "expected an attribute name after '.'");
      }
    } else if (IsOp("[")) {
      Next();
      PKV_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      ExprPtr call = MakeExpr(Expr::Kind::kCall, Peek().line);
      call->a = std::move(node);
      PKV_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  int line = Peek().line;
  ExprPtr start;
  if (!IsOp(":")) {
    PKV_ASSIGN_OR_RETURN(start, ParseExpression());
    if (IsOp("]")) {
      Next();
      ExprPtr e = MakeExpr(Expr::Kind::kSubscript, line);
      e->a = std::move(node);
      e->b = std::move(start);
      return e;
    }
  }
  ExprPtr e = MakeExpr(Expr::Kind::kSlice, line);
  e->a = std::move(node);
  e->b = std::move(start);
  PKV_RETURN_IF_ERROR(Expect(":"));
  if (!IsOp("]") && !IsOp(":")) {
    PKV_ASSIGN_OR_RETURN(e->c, ParseExpression());
  }
  if (IsOp(":")) {
    Next();
    if (!IsOp("]")) {
      PKV_ASSIGN_OR_RETURN(e->d, ParseExpression());
    }
  }
  PKV_RETURN_IF_ERROR(Expect("]"));
  return e;
}

absl::Status Parser::ParseCallArgs(Expr* call) {
  PKV_RETURN_IF_ERROR(Expect("("));
  while (!IsOp(")")) {
    std::string name;
    if (Peek().type == TokenType::kName && IsOp("=", 1)) {
      name = Next().text;
      Next();
    }
    PKV_ASSIGN_OR_RETURN(ExprPtr arg, ParseExpression());
    call->args.push_back(std::move(arg));
    call->arg_names.push_back(std::move(name));
    if (!IsOp(",")) break;
    Next();
  }
  return Expect(")");
}

absl::StatusOr<ExprPtr> Parser::ParseFilterAndTests(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      int line = Next().line;
      ExprPtr f = MakeExpr(Expr::Kind::kFilter, line);
      PKV_ASSIGN_OR_RETURN(f->name, ExpectName());
      f->a = std::move(node);
      if (IsOp("(")) PKV_RETURN_IF_ERROR(ParseCallArgs(f.get()));
      node = std::move(f);
    } else if (IsName("is")) {
      int line = Next().line;
      ExprPtr t = MakeExpr(Expr::Kind::kTest, line);
      if (IsName("not")) {
        Next();
        t->negated = true;
      }
      PKV_ASSIGN_OR_RETURN(t->name, ExpectName());
      t->a = std::move(node);
      const Token& p = Peek();
      bool bare_arg = (p.type == TokenType::kName && p.text != "else" && p.text != "or" &&
                       p.text != "and" && p.text != "if" && p.text != "is") ||
                      p.type == TokenType::kString || p.type == TokenType::kInt ||
                      p.type == TokenType::kFloat || IsOp("[") || IsOp("{");
      if (IsOp("(")) {
        PKV_RETURN_IF_ERROR(ParseCallArgs(t.get()));
      } else if (bare_arg) {
        PKV_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
        PKV_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
        t->args.push_back(std::move(arg));
        t->arg_names.emplace_back();
      }
      node = std::move(t);
    } else {
      return node;
    }
  }
}

}  // namespace pkv::chat::internal
