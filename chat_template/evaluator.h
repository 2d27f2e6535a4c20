// Executes a compiled template against one set of variables. One Evaluator per Render call (it
// owns the scopes and the output buffer); the syntax tree it reads is shared and never modified.
// Work is bounded: output size, loop steps and macro recursion have limits, and exceeding one is
// RESOURCE_EXHAUSTED. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chat_template/ast.h"
#include "chat_template/value.h"

namespace pkv::chat {

struct EvaluatorLimits {
  size_t max_output_bytes = 64 << 20;
  int64_t max_steps = 10'000'000;  // statements executed plus loop iterations
  int max_call_depth = 100;        // nested macro calls (Python's recursion limit ~ 1000 frames)
  // Wall-clock bound on one render, checked every kDeadlineCheckSteps steps: a backstop for
  // templates whose single steps are expensive (membership tests over long lists in a loop).
  absl::Duration max_render_time = absl::Seconds(10);
};

class Evaluator {
 public:
  // `variables` must be a dict; its members become the template's globals beside the builtins.
  Evaluator(const Value& variables, absl::Time now, const EvaluatorLimits& limits);

  absl::StatusOr<std::string> Run(const StmtList& program);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::Status Exec(const StmtList& body);
  absl::Status ExecStmt(const Stmt& s);
  absl::Status ExecIf(const Stmt& s);
  absl::Status ExecFor(const Stmt& s);
  absl::Status ExecLoopBody(const Stmt& s, const ValueList& items);
  absl::Status ExecSet(const Stmt& s);
  absl::Status Bind(const std::vector<std::string>& targets, const Value& value, int line);
  absl::StatusOr<std::string> Capture(const StmtList& body);
  absl::StatusOr<Value> CallMacro(const Stmt& macro, const CallArgs& args);
  absl::Status Append(std::string_view text);
  absl::Status Step();

  absl::StatusOr<Value> Eval(const Expr& e);
  absl::StatusOr<Value> EvalInner(const Expr& e);
  absl::StatusOr<Value> EvalCollection(const Expr& e);
  absl::StatusOr<Value> EvalAttribute(const Expr& e);
  absl::StatusOr<Value> EvalSubscript(const Expr& e);
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e);
  absl::StatusOr<Value> EvalUnary(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);

  Value Lookup(const std::string& name) const;

  EvaluatorLimits limits_;
  std::vector<ValueDict> scopes_;  // [0] builtins and variables, [1] template, then loops/macros
  std::string out_;
  Flow flow_ = Flow::kNormal;
  int64_t steps_ = 0;
  absl::Time deadline_;
  int call_depth_ = 0;
};

// Adds "chat template: line L: " to an evaluation error, except raise_exception's message and
// errors that already carry a position or a limit.
absl::Status AtLine(int line, absl::Status status);

}  // namespace pkv::chat
