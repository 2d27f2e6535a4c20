// The syntax tree of a compiled chat template. Built once by the parser, then only read: a tree is
// shared by every concurrent Render. Every node carries the source line for error messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat_template/value.h"

namespace pkv::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // args: items
    kTuple,      // args: items
    kDict,       // args: key0, value0, key1, value1, ...
    kAttribute,  // a.name
    kSubscript,  // a[b]
    kSlice,      // a[b:c:d]; b, c, d may be null
    kCall,       // a(args); arg_names[i] is "" for positional arguments
    kFilter,     // a | name(args)
    kTest,       // a is [not] name(args)
    kUnary,      // op a, op in {"-", "+", "not"}
    kBinary,     // a op b, op in {"+", "-", "*", "/", "//", "%", "**", "~", comparisons, "in",
                 // "not in", "and", "or"}
    kCondition,  // b if a else c; c may be null
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;      // kName, kAttribute, kFilter, kTest, kUnary/kBinary operator
  bool negated = false;  // kTest
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> args;
  std::vector<std::string> arg_names;
};

// The name under which a filter block's rendered body reaches its filter chain (no template can
// spell it: it is not an identifier).
inline constexpr char kFilterBlockInput[] = "(filter block)";

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] -> bodies[i]; bodies.back() is the else branch when longer
    kFor,          // for targets in expr [if filter]: bodies[0], else bodies[1]
    kSet,          // targets (or ns.attr as target + attr) = expr, or block set into bodies[0]
    kMacro,        // name(params = defaults): bodies[0]
    kFilterBlock,  // {% filter f(args) | g %}bodies[0]{% endfilter %}: expr is the filter chain
                   // applied to the variable kFilterBlockInput
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;                  // kText, kMacro name
  std::vector<std::string> targets;  // kFor / kSet names, kMacro parameter names
  std::string attr;                  // kSet: "ns.attr = ..." writes attribute attr of targets[0]
  ExprPtr expr;                      // kOutput, kFor iterable, kSet value
  ExprPtr filter;                    // kFor inline "if"
  std::vector<ExprPtr> conditions;   // kIf; kMacro: parameter defaults (null when none)
  std::vector<StmtList> bodies;
};

}  // namespace pkv::chat
