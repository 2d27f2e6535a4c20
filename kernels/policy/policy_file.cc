#include "kernels/policy/policy_file.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace pkv::policy {

using decode::Route;

namespace {

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Shortest text that parses back to the same double.
std::string Num(double v) { return absl::StrFormat("%.17g", v); }

std::string RouteList(const std::vector<Route>& routes) {
  std::vector<std::string> q;
  for (Route r : routes) q.push_back(Quote(decode::RouteName(r)));
  return absl::StrCat("[", absl::StrJoin(q, ", "), "]");
}

std::string ThresholdJson(const ThresholdRules& t) {
  return absl::StrCat("{\"batch_edges\": [", absl::StrJoin(t.batch_edges, ", "),
                      "], \"long_context_tokens\": ", t.long_context_tokens,
                      ",\n    \"short_routes\": ", RouteList(t.short_routes),
                      ",\n    \"long_routes\": ", RouteList(t.long_routes), "}");
}

std::string LearnedJson(const CostModel& m, const CostFitReport& rep) {
  std::vector<std::string> routes;
  for (Route r : kCandidateRoutes) {
    const RouteModel& rm = m.routes[static_cast<int>(r)];
    if (rm.empty()) continue;
    std::vector<std::string> terms;
    for (size_t k = 0; k < rm.inputs.size(); ++k) {
      terms.push_back(absl::StrCat(Quote(InputName(rm.inputs[k])), ": ", Num(rm.coef[k])));
    }
    routes.push_back(absl::StrCat("      ", Quote(decode::RouteName(r)), ": {",
                                  absl::StrJoin(terms, ", "), "}"));
  }
  std::array<bool, kNumInputs> used{};
  for (const RouteModel& rm : m.routes) {
    for (Input in : rm.inputs) used[static_cast<int>(in)] = true;
  }
  std::vector<std::string> ranges;
  for (int k = 0; k < kNumInputs; ++k) {
    if (used[k] && std::isfinite(m.input_lo[k]) && std::isfinite(m.input_hi[k])) {
      ranges.push_back(absl::StrCat("      ", Quote(InputName(static_cast<Input>(k))), ": [",
                                    Num(m.input_lo[k]), ", ", Num(m.input_hi[k]), "]"));
    }
  }
  const std::string margin =
      m.margin > 0
          ? absl::StrCat(", \"default_route\": ", Quote(decode::RouteName(m.default_route)),
                         ", \"margin\": ", Num(m.margin))
          : "";
  return absl::StrCat("{\"ridge\": ", Num(m.ridge), margin, ",\n    \"input_range\": {\n",
                      absl::StrJoin(ranges, ",\n"), "},\n    \"routes\": {\n",
                      absl::StrJoin(routes, ",\n"),
                      "},\n    \"loo_gm_regret\": ", Num(rep.loo_gm_regret),
                      ", \"loo_worst_regret\": ", Num(rep.loo_worst_regret),
                      ", \"fit_rms_log_error\": ", Num(rep.fit_rms_log_error), "}");
}

}  // namespace

std::string PolicyFileToJson(const PolicyFile& f) {
  std::string out = absl::StrCat(
      "{\n  \"format\": \"pkv-decode-policy\", \"version\": ",
      f.has_learned && f.learned.margin > 0 ? 2 : 1, ",\n  \"kind\": ", Quote(f.kind),
      ",\n  \"gpu\": {\"name\": ", Quote(f.gpu_name), ", \"num_sms\": ", f.num_sms,
      ", \"ctas_per_sm\": ", f.ctas_per_sm,
      "},\n  \"shape\": {\"num_q_heads\": ", f.shape.num_q_heads,
      ", \"num_kv_heads\": ", f.shape.num_kv_heads, ", \"head_dim\": ", f.shape.head_dim,
      ", \"page_size\": ", f.shape.page_size,
      f.shape.kv_elem_bytes != 2 ? absl::StrCat(", \"kv_elem_bytes\": ", f.shape.kv_elem_bytes)
                                 : std::string(),
      "},\n  \"split\": {\"min_split_tokens\": ", f.split.min_split_tokens,
      ", \"workqueue_chunk_tokens\": ", f.split.workqueue_chunk_tokens,
      "},\n  \"source\": ", Quote(f.source), ", \"cells\": ", f.cells);
  if (f.has_threshold) absl::StrAppend(&out, ",\n  \"threshold\": ", ThresholdJson(f.threshold));
  if (f.has_learned) {
    absl::StrAppend(&out, ",\n  \"learned\": ", LearnedJson(f.learned, f.learned_report));
  }
  return out + "\n}\n";
}

namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Error(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("policy file: ", what));
}

absl::StatusOr<const JsonValue*> Member(const JsonValue& obj, std::string_view name,
                                        JsonValue::Type type, std::string_view context) {
  const JsonValue* v = obj.Find(name);
  if (v == nullptr || v->type() != type) {
    static constexpr const char* kTypes[] = {"null",     "a boolean", "a number",
                                             "a string", "an array",  "an object"};
    return Error(absl::StrCat(AV(context), ".", AV(name),
                              v == nullptr ? " is missing" : " must be ",
                              v == nullptr ? "" : kTypes[static_cast<int>(type)]));
  }
  return v;
}

absl::StatusOr<int32_t> Int(const JsonValue& obj, std::string_view name, std::string_view ctx) {
  PKV_ASSIGN_OR_RETURN(int64_t v, JsonGetInt(obj, name, ctx));
  if (v < INT32_MIN || v > INT32_MAX)
    return Error(absl::StrCat(AV(ctx), ".", AV(name), " out of range"));
  return static_cast<int32_t>(v);
}

absl::StatusOr<std::vector<Route>> ParseRoutes(const JsonValue& arr, std::string_view ctx) {
  std::vector<Route> out;
  for (const JsonValue& v : arr.items()) {
    if (!v.is_string()) return Error(absl::StrCat(AV(ctx), ": route names must be strings"));
    absl::StatusOr<Route> r = decode::ParseRoute(v.str());
    if (!r.ok()) return Error(absl::StrCat(AV(ctx), ": ", r.status().message()));
    out.push_back(*r);
  }
  return out;
}

absl::StatusOr<ThresholdRules> ParseThreshold(const JsonValue& t, const SplitParams& split) {
  ThresholdRules r;
  r.split = split;
  PKV_ASSIGN_OR_RETURN(const JsonValue* edges,
                       Member(t, "batch_edges", JsonValue::Type::kArray, "threshold"));
  for (const JsonValue& e : edges->items()) {
    if (!e.is_integer()) return Error("threshold.batch_edges must hold integers");
    r.batch_edges.push_back(static_cast<int32_t>(e.integer()));
  }
  PKV_ASSIGN_OR_RETURN(r.long_context_tokens, Int(t, "long_context_tokens", "threshold"));
  PKV_ASSIGN_OR_RETURN(const JsonValue* s,
                       Member(t, "short_routes", JsonValue::Type::kArray, "threshold"));
  PKV_ASSIGN_OR_RETURN(r.short_routes, ParseRoutes(*s, "threshold.short_routes"));
  PKV_ASSIGN_OR_RETURN(const JsonValue* l,
                       Member(t, "long_routes", JsonValue::Type::kArray, "threshold"));
  PKV_ASSIGN_OR_RETURN(r.long_routes, ParseRoutes(*l, "threshold.long_routes"));
  // Structural checks (lengths, order, candidates) in one place.
  PKV_RETURN_IF_ERROR(ThresholdPolicy::Create(r).status());
  return r;
}

// Version 2's "default_route" and "margin" (absent: margin 0).
absl::Status ParseMargin(const JsonValue& l, int64_t version, CostModel* m) {
  PKV_ASSIGN_OR_RETURN(m->margin, JsonGetNumberOr(l, "margin", 0.0, "learned"));
  if (l.Find("margin") == nullptr) return absl::OkStatus();
  if (version < 2) return Error("learned.margin needs version 2");
  if (!(m->margin >= 0) || !std::isfinite(m->margin)) {
    return Error("learned.margin must be finite and >= 0");
  }
  PKV_ASSIGN_OR_RETURN(std::string name, JsonGetStringOr(l, "default_route", "", "learned"));
  absl::StatusOr<Route> r = decode::ParseRoute(name);
  if (!r.ok()) return Error(absl::StrCat("learned.default_route: ", r.status().message()));
  m->default_route = *r;
  return absl::OkStatus();
}

absl::Status ParseLearned(const JsonValue& l, int64_t version, PolicyFile* f) {
  CostModel& m = f->learned;
  m.split = f->split;
  PKV_ASSIGN_OR_RETURN(m.ridge, JsonGetNumberOr(l, "ridge", 0.0, "learned"));
  PKV_RETURN_IF_ERROR(ParseMargin(l, version, &m));
  PKV_ASSIGN_OR_RETURN(const JsonValue* routes,
                       Member(l, "routes", JsonValue::Type::kObject, "learned"));
  for (const JsonValue::Member& member : routes->members()) {
    absl::StatusOr<Route> r = decode::ParseRoute(member.first);
    if (!r.ok()) return Error(absl::StrCat("learned.routes: ", r.status().message()));
    if (!member.second.is_object()) {
      return Error(absl::StrCat("learned.routes.", member.first,
                                " must be an object of input name: coefficient"));
    }
    RouteModel& rm = m.routes[static_cast<int>(*r)];
    if (!rm.empty()) return Error(absl::StrCat("learned.routes.", member.first, " given twice"));
    for (const JsonValue::Member& term : member.second.members()) {
      absl::StatusOr<Input> in = ParseInput(term.first);
      if (!in.ok()) {
        return Error(absl::StrCat("learned.routes.", member.first, ": ", in.status().message()));
      }
      if (!term.second.is_number()) {
        return Error(
            absl::StrCat("learned.routes.", member.first, ".", term.first, " must be a number"));
      }
      rm.inputs.push_back(*in);
      rm.coef.push_back(term.second.number());
    }
  }
  if (const JsonValue* range = l.Find("input_range"); range != nullptr) {
    if (!range->is_object()) return Error("learned.input_range must be an object");
    for (const JsonValue::Member& member : range->members()) {
      absl::StatusOr<Input> in = ParseInput(member.first);
      if (!in.ok()) return Error(absl::StrCat("learned.input_range: ", in.status().message()));
      const auto& v = member.second.items();
      if (!member.second.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number() ||
          v[0].number() > v[1].number()) {
        return Error(absl::StrCat("learned.input_range.", member.first,
                                  " must be [low, high] with low <= high"));
      }
      m.input_lo[static_cast<int>(*in)] = v[0].number();
      m.input_hi[static_cast<int>(*in)] = v[1].number();
    }
  }
  PKV_ASSIGN_OR_RETURN(f->learned_report.loo_gm_regret,
                       JsonGetNumberOr(l, "loo_gm_regret", 1.0, "learned"));
  PKV_ASSIGN_OR_RETURN(f->learned_report.loo_worst_regret,
                       JsonGetNumberOr(l, "loo_worst_regret", 1.0, "learned"));
  PKV_ASSIGN_OR_RETURN(f->learned_report.fit_rms_log_error,
                       JsonGetNumberOr(l, "fit_rms_log_error", 0.0, "learned"));
  return CostModelPolicy::Create(m).status();
}

absl::Status ParseHeader(const JsonValue& root, PolicyFile* f) {
  PKV_ASSIGN_OR_RETURN(std::string format, JsonGetStringOr(root, "format", "", "policy"));
  if (format != "pkv-decode-policy") {
    return Error("format must be \"pkv-decode-policy\"");
  }
  PKV_ASSIGN_OR_RETURN(int64_t version, JsonGetInt(root, "version", "policy"));
  if (version < 1 || version > kPolicyFileVersion) {
    return Error(absl::StrCat("version ", version, " is not supported (this build reads 1 to ",
                              kPolicyFileVersion, ")"));
  }
  PKV_ASSIGN_OR_RETURN(f->kind, JsonGetStringOr(root, "kind", "learned", "policy"));
  PKV_ASSIGN_OR_RETURN(const JsonValue* gpu,
                       Member(root, "gpu", JsonValue::Type::kObject, "policy"));
  PKV_ASSIGN_OR_RETURN(f->gpu_name, JsonGetStringOr(*gpu, "name", "", "gpu"));
  PKV_ASSIGN_OR_RETURN(f->num_sms, Int(*gpu, "num_sms", "gpu"));
  PKV_ASSIGN_OR_RETURN(f->ctas_per_sm, Int(*gpu, "ctas_per_sm", "gpu"));
  if (f->num_sms <= 0 || f->ctas_per_sm <= 0)
    return Error("gpu.num_sms and ctas_per_sm must be > 0");
  PKV_ASSIGN_OR_RETURN(const JsonValue* shape,
                       Member(root, "shape", JsonValue::Type::kObject, "policy"));
  PKV_ASSIGN_OR_RETURN(f->shape.num_q_heads, Int(*shape, "num_q_heads", "shape"));
  PKV_ASSIGN_OR_RETURN(f->shape.num_kv_heads, Int(*shape, "num_kv_heads", "shape"));
  PKV_ASSIGN_OR_RETURN(f->shape.head_dim, Int(*shape, "head_dim", "shape"));
  PKV_ASSIGN_OR_RETURN(f->shape.page_size, Int(*shape, "page_size", "shape"));
  // Absent: 16-bit pages (files written before FP8 KV).
  PKV_ASSIGN_OR_RETURN(const int64_t kv_bytes, JsonGetIntOr(*shape, "kv_elem_bytes", 2, "shape"));
  f->shape.kv_elem_bytes = static_cast<int32_t>(kv_bytes);
  PKV_RETURN_IF_ERROR(decode::ValidateShape(f->shape));
  if (const JsonValue* split = root.Find("split"); split != nullptr) {
    if (!split->is_object()) return Error("split must be an object");
    PKV_ASSIGN_OR_RETURN(int64_t m, JsonGetIntOr(*split, "min_split_tokens", 128, "split"));
    PKV_ASSIGN_OR_RETURN(int64_t c, JsonGetIntOr(*split, "workqueue_chunk_tokens", 0, "split"));
    if (m < 1 || m > (1 << 20) || c < 0 || c > (1 << 24)) {
      return Error("split.min_split_tokens must be in 1..2^20, workqueue_chunk_tokens >= 0");
    }
    f->split = SplitParams{static_cast<int32_t>(m), static_cast<int32_t>(c)};
  }
  PKV_ASSIGN_OR_RETURN(f->source, JsonGetStringOr(root, "source", "", "policy"));
  PKV_ASSIGN_OR_RETURN(int64_t cells, JsonGetIntOr(root, "cells", 0, "policy"));
  f->cells = static_cast<int32_t>(cells);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PolicyFile> ParsePolicyFile(std::string_view json) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) return Error(root.status().message());
  if (!root->is_object()) return Error("the top level must be a JSON object");
  PolicyFile f;
  PKV_RETURN_IF_ERROR(ParseHeader(*root, &f));
  if (const JsonValue* t = root->Find("threshold"); t != nullptr) {
    if (!t->is_object()) return Error("threshold must be an object");
    PKV_ASSIGN_OR_RETURN(f.threshold, ParseThreshold(*t, f.split));
    f.has_threshold = true;
  }
  if (const JsonValue* l = root->Find("learned"); l != nullptr) {
    if (!l->is_object()) return Error("learned must be an object");
    PKV_ASSIGN_OR_RETURN(int64_t version, JsonGetInt(*root, "version", "policy"));
    PKV_RETURN_IF_ERROR(ParseLearned(*l, version, &f));
    f.has_learned = true;
  }
  if (f.kind != "learned" && f.kind != "threshold") {
    return Error(absl::StrCat("kind \"", f.kind, "\" is not one of learned, threshold"));
  }
  if ((f.kind == "learned" && !f.has_learned) || (f.kind == "threshold" && !f.has_threshold)) {
    return Error(absl::StrCat("kind \"", f.kind, "\" but no \"", f.kind, "\" section"));
  }
  return f;
}

absl::StatusOr<PolicyFile> ReadPolicyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read policy file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<PolicyFile> f = ParsePolicyFile(text.str());
  if (!f.ok())
    return absl::Status(f.status().code(), absl::StrCat(path, ": ", f.status().message()));
  return f;
}

absl::Status WritePolicyFile(const std::string& path, const PolicyFile& file) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    out << PolicyFileToJson(file);
    if (!out.flush()) return absl::InternalError(absl::StrCat("write failed: ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RoutePolicy>> MakePolicy(const PolicyFile& file,
                                                        std::string_view kind) {
  const std::string_view k = kind.empty() ? std::string_view(file.kind) : kind;
  if (k == "learned") {
    if (!file.has_learned) return Error("no learned section for kind learned");
    PKV_ASSIGN_OR_RETURN(CostModelPolicy p, CostModelPolicy::Create(file.learned));
    return std::unique_ptr<RoutePolicy>(new CostModelPolicy(std::move(p)));
  }
  if (k == "threshold") {
    if (!file.has_threshold) return Error("no threshold section for kind threshold");
    PKV_ASSIGN_OR_RETURN(ThresholdPolicy p, ThresholdPolicy::Create(file.threshold));
    return std::unique_ptr<RoutePolicy>(new ThresholdPolicy(std::move(p)));
  }
  return Error(absl::StrCat("policy kind \"", AV(k), "\" is not one of learned, threshold"));
}

std::string PolicyCacheFileName(std::string_view device_name, int32_t num_sms,
                                const KvShape& shape) {
  std::string name = PolicyFileName(device_name, num_sms, shape.kv_elem_bytes);
  name.resize(name.size() - 5);  // ".json"
  return absl::StrCat(name, "-q", shape.num_q_heads, "-kv", shape.num_kv_heads, "-d",
                      shape.head_dim, "-p", shape.page_size, ".json");
}

std::string PolicyFileName(std::string_view device_name, int32_t num_sms, int32_t kv_elem_bytes) {
  std::string out;
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.empty()) out = "gpu";
  return absl::StrCat(out, "-", num_sms, "sm", kv_elem_bytes == 1 ? "-fp8" : "", ".json");
}

}  // namespace pkv::policy
