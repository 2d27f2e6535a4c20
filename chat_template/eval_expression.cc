// Expressions: names, literals, attribute/subscript/slice access with jinja2's getattr/getitem
// rules, calls (methods, builtins, macros), filters, tests and operators.
#include "absl/strings/str_cat.h"
#include "chat_template/evaluator.h"
#include "chat_template/filters.h"
#include "chat_template/jinja_tests.h"
#include "chat_template/methods.h"
#include "chat_template/operators.h"
#include "chat_template/text.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

absl::Status UndefinedError(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("undefined value has no ", std::string(what)));
}

Value BoundMethod(const Value& self, const std::string& name) {
  return Value::Callable(name,
                         [self, name](CallArgs& args) { return CallMethod(self, name, args); });
}

// jinja2's getitem for an int index on a list or str; out of range -> undefined.
Value IndexInto(const Value& obj, int64_t i) {
  if (obj.is_list()) {
    int64_t n = static_cast<int64_t>(obj.list().size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? obj.list()[i] : Value();
  }
  std::vector<char32_t> cps = text::Decode(obj.str());
  int64_t n = static_cast<int64_t>(cps.size());
  if (i < 0) i += n;
  return i >= 0 && i < n ? Value::String(text::Encode({cps[i]})) : Value();
}

// Python's slice.indices() then the walk.
std::vector<int64_t> SliceIndices(int64_t n, const Value& start, const Value& stop, int64_t step) {
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (!v.is_int() && !v.is_bool()) return dflt;
    int64_t x = v.int_value();
    if (x < 0) x = std::max<int64_t>(x + n, step < 0 ? -1 : 0);
    return std::min<int64_t>(x, step < 0 ? n - 1 : n);
  };
  int64_t b = clamp(start, step < 0 ? n - 1 : 0), e = clamp(stop, step < 0 ? -1 : n);
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

}  // namespace

absl::StatusOr<Value> Evaluator::Eval(const Expr& e) {
  absl::StatusOr<Value> v = EvalInner(e);
  if (!v.ok()) return AtLine(e.line, v.status());
  return v;
}

absl::StatusOr<Value> Evaluator::EvalInner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple:
    case Expr::Kind::kDict:
      return EvalCollection(e);
    case Expr::Kind::kAttribute:
      return EvalAttribute(e);
    case Expr::Kind::kSubscript:
      return EvalSubscript(e);
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter: {
      PKV_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
      PKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      return ApplyFilter(e.name, v, args);
    }
    case Expr::Kind::kTest: {
      PKV_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
      PKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      PKV_ASSIGN_OR_RETURN(bool pass, ApplyTest(e.name, v, args.positional));
      return Value::Bool(pass != e.negated);
    }
    case Expr::Kind::kUnary:
      return EvalUnary(e);
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kCondition: {
      PKV_ASSIGN_OR_RETURN(Value cond, Eval(*e.a));
      if (cond.Truthy()) return Eval(*e.b);
      if (e.c) return Eval(*e.c);
      return Value();
    }
  }
  return Value();
}

absl::StatusOr<Value> Evaluator::EvalCollection(const Expr& e) {
  Value out;
  if (e.kind == Expr::Kind::kDict) {
    auto dict = std::make_shared<ValueDict>();
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      PKV_ASSIGN_OR_RETURN(Value key, Eval(*e.args[i]));
      if (!key.is_string()) return absl::InvalidArgumentError("dict keys must be strings");
      PKV_ASSIGN_OR_RETURN(Value value, Eval(*e.args[i + 1]));
      dict->Set(key.str(), std::move(value));
    }
    out = Value::Dict(std::move(dict));
  } else {
    ValueList items;
    for (const ExprPtr& arg : e.args) {
      PKV_ASSIGN_OR_RETURN(Value v, Eval(*arg));
      items.push_back(std::move(v));
    }
    out = Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
  }
  if (out.depth() > kMaxValueDepth) {
    return absl::ResourceExhaustedError("chat template: values nested too deeply");
  }
  return out;
}

absl::StatusOr<Value> Evaluator::EvalAttribute(const Expr& e) {
  PKV_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
  if (obj.is_undefined()) return UndefinedError(absl::StrCat("attribute '", e.name, "'"));
  if (HasMethod(obj, e.name)) return BoundMethod(obj, e.name);
  if (obj.is_dict()) {
    const Value* v = obj.dict().Find(e.name);
    return v ? *v : Value();
  }
  return Value();
}

absl::StatusOr<Value> Evaluator::EvalSubscript(const Expr& e) {
  PKV_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
  PKV_ASSIGN_OR_RETURN(Value key, Eval(*e.b));
  if (obj.is_undefined()) return UndefinedError("items");
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
    if (HasMethod(obj, key.str())) return BoundMethod(obj, key.str());
    return Value();
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    return IndexInto(obj, key.int_value());
  }
  if (key.is_string() && HasMethod(obj, key.str())) return BoundMethod(obj, key.str());
  return Value();
}

absl::StatusOr<Value> Evaluator::EvalSlice(const Expr& e) {
  PKV_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
  Value start, stop, step;
  if (e.b) {
    PKV_ASSIGN_OR_RETURN(start, Eval(*e.b));
  }
  if (e.c) {
    PKV_ASSIGN_OR_RETURN(stop, Eval(*e.c));
  }
  if (e.d) {
    PKV_ASSIGN_OR_RETURN(step, Eval(*e.d));
  }
  if (obj.is_undefined()) return UndefinedError("items");
  int64_t stride = step.is_int() || step.is_bool() ? step.int_value() : 1;
  if (stride == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  if (obj.is_list()) {
    ValueList out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(obj.list().size()), start, stop, stride)) {
      out.push_back(obj.list()[i]);
    }
    return Value::List(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    std::vector<char32_t> cps = text::Decode(obj.str()), out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(cps.size()), start, stop, stride)) {
      out.push_back(cps[i]);
    }
    return Value::String(text::Encode(out));
  }
  return Value();
}

absl::StatusOr<CallArgs> Evaluator::EvalArgs(const Expr& e) {
  CallArgs args;
  for (size_t i = 0; i < e.args.size(); ++i) {
    PKV_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
    if (e.arg_names[i].empty()) {
      if (!args.keyword.empty()) {
        return absl::InvalidArgumentError("positional argument follows keyword argument");
      }
      args.positional.push_back(std::move(v));
    } else {
      args.keyword.emplace_back(e.arg_names[i], std::move(v));
    }
  }
  return args;
}

absl::StatusOr<Value> Evaluator::EvalCall(const Expr& e) {
  if (e.a->kind == Expr::Kind::kAttribute) {
    PKV_ASSIGN_OR_RETURN(Value self, Eval(*e.a->a));
    if (HasMethod(self, e.a->name)) {
      PKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
      return CallMethod(self, e.a->name, args);
    }
  }
  PKV_ASSIGN_OR_RETURN(Value fn, Eval(*e.a));
  if (!fn.is_callable()) {
    if (fn.is_undefined()) {
      return absl::InvalidArgumentError(e.a->kind == Expr::Kind::kName
                                            ? absl::StrCat("'", e.a->name, "' is undefined")
                                            : std::string("undefined value is not callable"));
    }
    return absl::InvalidArgumentError(absl::StrCat("'", fn.TypeName(), "' object is not callable"));
  }
  PKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e));
  return fn.function()(args);
}

absl::StatusOr<Value> Evaluator::EvalUnary(const Expr& e) {
  PKV_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
  if (e.name == "not") return Value::Bool(!v.Truthy());
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
  }
  if (e.name == "+") return v.is_float() ? v : Value::Int(v.int_value());
  if (v.is_float()) return Value::Float(-v.float_value());
  if (v.int_value() == INT64_MIN) return absl::InvalidArgumentError("integer overflow");
  return Value::Int(-v.int_value());
}

absl::StatusOr<Value> Evaluator::EvalBinary(const Expr& e) {
  PKV_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
  if (e.name == "and") return a.Truthy() ? Eval(*e.b) : a;
  if (e.name == "or") return a.Truthy() ? a : Eval(*e.b);
  PKV_ASSIGN_OR_RETURN(Value b, Eval(*e.b));
  return BinaryOp(e.name, a, b);
}

}  // namespace pkv::chat
