// Statements: output, if, for (with loop variables), set, macros, break/continue.
#include "chat_template/evaluator.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chat_template/builtins.h"
#include "chat_template/operators.h"
#include "common/status_macros.h"

namespace pkv::chat {

absl::Status AtLine(int line, absl::Status status) {
  if (status.ok() || IsRaisedError(status) || absl::IsResourceExhausted(status) ||
      absl::StartsWith(status.message(), "chat template: ")) {
    return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat("chat template: line ", line, ": ", status.message()));
}

Evaluator::Evaluator(const Value& variables, absl::Time now, const EvaluatorLimits& limits)
    : limits_(limits), scopes_(2), deadline_(absl::Now() + limits.max_render_time) {
  AddBuiltins(now, &scopes_[0]);
  if (variables.is_dict()) {
    for (const auto& [k, v] : variables.dict().items) scopes_[0].Set(k, v);
  }
}

absl::StatusOr<std::string> Evaluator::Run(const StmtList& program) {
  PKV_RETURN_IF_ERROR(Exec(program));
  return std::move(out_);
}

Value Evaluator::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if (const Value* v = it->Find(name)) return *v;
  }
  return Value();
}

absl::Status Evaluator::Step() {
  constexpr int64_t kDeadlineCheckSteps = 256;
  if (++steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: too much work (more than ", limits_.max_steps, " steps)"));
  }
  if (steps_ % kDeadlineCheckSteps == 0 && absl::Now() > deadline_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: rendering took longer than ",
                     absl::FormatDuration(limits_.max_render_time)));
  }
  return absl::OkStatus();
}

absl::Status Evaluator::Append(std::string_view text) {
  if (out_.size() + text.size() > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: output larger than ", limits_.max_output_bytes, " bytes"));
  }
  out_.append(text);
  return absl::OkStatus();
}

absl::Status Evaluator::Exec(const StmtList& body) {
  for (const auto& s : body) {
    PKV_RETURN_IF_ERROR(ExecStmt(*s));
    if (flow_ != Flow::kNormal) break;
  }
  return absl::OkStatus();
}

absl::Status Evaluator::ExecStmt(const Stmt& s) {
  PKV_RETURN_IF_ERROR(Step());
  switch (s.kind) {
    case Stmt::Kind::kText:
      return Append(s.text);
    case Stmt::Kind::kOutput: {
      PKV_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      return Append(v.ToStr());
    }
    case Stmt::Kind::kIf:
      return ExecIf(s);
    case Stmt::Kind::kFor:
      return ExecFor(s);
    case Stmt::Kind::kSet:
      return ExecSet(s);
    case Stmt::Kind::kMacro: {
      const Stmt* macro = &s;
      scopes_.back().Set(s.text, Value::Callable(s.text, [this, macro](CallArgs& args) {
                           return CallMacro(*macro, args);
                         }));
      return absl::OkStatus();
    }
    case Stmt::Kind::kFilterBlock: {
      PKV_ASSIGN_OR_RETURN(std::string text, Capture(s.bodies[0]));
      scopes_.emplace_back();
      scopes_.back().Set(kFilterBlockInput, Value::String(std::move(text)));
      absl::StatusOr<Value> v = Eval(*s.expr);
      scopes_.pop_back();
      if (!v.ok()) return v.status();
      return Append(v->ToStr());
    }
    case Stmt::Kind::kBreak:
      flow_ = Flow::kBreak;
      return absl::OkStatus();
    case Stmt::Kind::kContinue:
      flow_ = Flow::kContinue;
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Evaluator::ExecIf(const Stmt& s) {
  for (size_t i = 0; i < s.conditions.size(); ++i) {
    PKV_ASSIGN_OR_RETURN(Value cond, Eval(*s.conditions[i]));
    if (cond.Truthy()) return Exec(s.bodies[i]);
  }
  if (s.bodies.size() > s.conditions.size()) return Exec(s.bodies.back());
  return absl::OkStatus();
}

absl::Status Evaluator::Bind(const std::vector<std::string>& targets, const Value& value,
                             int line) {
  if (targets.size() == 1) {
    scopes_.back().Set(targets[0], value);
    return absl::OkStatus();
  }
  absl::StatusOr<ValueList> items = Iterate(value);
  if (!items.ok() || items->size() != targets.size()) {
    return AtLine(
        line, absl::InvalidArgumentError(absl::StrCat("cannot unpack ", value.TypeName(), " into ",
                                                      targets.size(), " names")));
  }
  for (size_t i = 0; i < targets.size(); ++i) scopes_.back().Set(targets[i], (*items)[i]);
  return absl::OkStatus();
}

absl::Status Evaluator::ExecFor(const Stmt& s) {
  PKV_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
  absl::StatusOr<ValueList> all = Iterate(iterable);
  if (!all.ok()) return AtLine(s.line, all.status());
  scopes_.emplace_back();
  ValueList items;
  for (Value& item : *all) {
    if (s.filter) {
      PKV_RETURN_IF_ERROR(Bind(s.targets, item, s.line));
      PKV_ASSIGN_OR_RETURN(Value keep, Eval(*s.filter));
      if (!keep.Truthy()) continue;
    }
    items.push_back(std::move(item));
  }
  absl::Status status = ExecLoopBody(s, items);
  scopes_.pop_back();
  PKV_RETURN_IF_ERROR(status);
  if (items.empty() && s.bodies.size() > 1) return Exec(s.bodies[1]);
  return absl::OkStatus();
}

absl::Status Evaluator::ExecLoopBody(const Stmt& s, const ValueList& items) {
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    PKV_RETURN_IF_ERROR(Step());
    // jinja2: what the body sets lives for one iteration; the next starts from the outer scope.
    scopes_.back().items.clear();
    PKV_RETURN_IF_ERROR(Bind(s.targets, items[i], s.line));
    Value loop = Value::EmptyDict();
    ValueDict& d = loop.dict();
    d.Set("index0", Value::Int(i));
    d.Set("index", Value::Int(i + 1));
    d.Set("revindex0", Value::Int(n - i - 1));
    d.Set("revindex", Value::Int(n - i));
    d.Set("first", Value::Bool(i == 0));
    d.Set("last", Value::Bool(i == n - 1));
    d.Set("length", Value::Int(n));
    d.Set("depth", Value::Int(1));
    d.Set("depth0", Value::Int(0));
    if (i > 0) d.Set("previtem", items[i - 1]);
    if (i + 1 < n) d.Set("nextitem", items[i + 1]);
    d.Set("cycle", Value::Callable("cycle", [i](CallArgs& args) -> absl::StatusOr<Value> {
            if (args.positional.empty())
              return absl::InvalidArgumentError("no items for cycling given");
            return args.positional[i % args.positional.size()];
          }));
    scopes_.back().Set("loop", loop);
    PKV_RETURN_IF_ERROR(Exec(s.bodies[0]));
    Flow flow = flow_;
    flow_ = Flow::kNormal;
    if (flow == Flow::kBreak) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Evaluator::Capture(const StmtList& body) {
  std::string saved = std::move(out_);
  out_.clear();
  absl::Status status = Exec(body);
  std::string captured = std::move(out_);
  out_ = std::move(saved);
  PKV_RETURN_IF_ERROR(status);
  return captured;
}

absl::Status Evaluator::ExecSet(const Stmt& s) {
  Value value;
  if (s.expr) {
    PKV_ASSIGN_OR_RETURN(value, Eval(*s.expr));
  } else {
    PKV_ASSIGN_OR_RETURN(std::string text, Capture(s.bodies[0]));
    value = Value::String(std::move(text));
  }
  if (s.attr.empty()) return Bind(s.targets, value, s.line);
  Value target = Lookup(s.targets[0]);
  if (!target.is_namespace()) {
    return AtLine(s.line,
                  absl::InvalidArgumentError("can't assign attribute on a non-namespace object"));
  }
  target.dict().Set(s.attr, std::move(value));
  return absl::OkStatus();
}

absl::StatusOr<Value> Evaluator::CallMacro(const Stmt& macro, const CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    return absl::ResourceExhaustedError("chat template: macro calls nested too deeply");
  }
  if (args.positional.size() > macro.targets.size()) {
    return absl::InvalidArgumentError(absl::StrCat("macro '", macro.text, "' takes not more than ",
                                                   macro.targets.size(), " argument(s)"));
  }
  ValueDict frame;
  for (size_t i = 0; i < args.positional.size(); ++i)
    frame.Set(macro.targets[i], args.positional[i]);
  for (const auto& [name, value] : args.keyword) {
    if (std::find(macro.targets.begin(), macro.targets.end(), name) == macro.targets.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("macro '", macro.text, "' takes no keyword argument '", name, "'"));
    }
    frame.Set(name, value);
  }
  std::vector<ValueDict> saved(std::make_move_iterator(scopes_.begin() + 2),
                               std::make_move_iterator(scopes_.end()));
  scopes_.resize(2);
  scopes_.push_back(std::move(frame));
  ++call_depth_;
  absl::Status status;
  for (size_t i = 0; i < macro.targets.size() && status.ok(); ++i) {
    if (scopes_.back().Find(macro.targets[i]) || !macro.conditions[i]) continue;
    absl::StatusOr<Value> dflt = Eval(*macro.conditions[i]);
    status = dflt.status();
    if (dflt.ok()) scopes_.back().Set(macro.targets[i], *dflt);
  }
  absl::StatusOr<std::string> text = status.ok() ? Capture(macro.bodies[0]) : status;
  flow_ = Flow::kNormal;
  --call_depth_;
  scopes_.resize(2);
  for (ValueDict& d : saved) scopes_.push_back(std::move(d));
  if (!text.ok()) return text.status();
  return Value::String(*std::move(text));
}

}  // namespace pkv::chat
