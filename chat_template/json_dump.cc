#include "chat_template/json_dump.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

struct Writer {
  const JsonDumpOptions& options;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  void NewLine(int level) {
    if (!options.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *options.indent;
  }

  absl::Status Write(const Value& v, int level) {
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return absl::OkStatus();
      case Value::Kind::kBool:
        out += v.bool_value() ? "true" : "false";
        return absl::OkStatus();
      case Value::Kind::kInt:
        absl::StrAppend(&out, v.int_value());
        return absl::OkStatus();
      case Value::Kind::kFloat: {
        double d = v.float_value();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d > 0 ? "Infinity" : "-Infinity";
        } else {
          out += PyFloatRepr(d);
        }
        return absl::OkStatus();
      }
      case Value::Kind::kString:
        AppendJsonString(v.str(), &out);
        return absl::OkStatus();
      case Value::Kind::kList:
        return WriteList(v.list(), level);
      case Value::Kind::kDict:
        if (!v.is_namespace()) return WriteDict(v.dict(), level);
        [[fallthrough]];
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable"));
    }
  }

  absl::Status WriteList(const ValueList& items, int level) {
    if (items.empty()) {
      out += "[]";
      return absl::OkStatus();
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      NewLine(level + 1);
      PKV_RETURN_IF_ERROR(Write(items[i], level + 1));
    }
    NewLine(level);
    out += ']';
    return absl::OkStatus();
  }

  absl::Status WriteDict(const ValueDict& dict, int level) {
    if (dict.items.empty()) {
      out += "{}";
      return absl::OkStatus();
    }
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& item : dict.items) items.push_back(&item);
    if (options.sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      NewLine(level + 1);
      AppendJsonString(items[i]->first, &out);
      out += key_sep;
      PKV_RETURN_IF_ERROR(Write(items[i]->second, level + 1));
    }
    NewLine(level);
    out += '}';
    return absl::OkStatus();
  }
};

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

absl::StatusOr<std::string> JsonDump(const Value& value, const JsonDumpOptions& options) {
  Writer w{options, options.item_separator.value_or(options.indent ? "," : ", "),
           options.key_separator.value_or(": "), ""};
  PKV_RETURN_IF_ERROR(w.Write(value, 0));
  return std::move(w.out);
}

}  // namespace pkv::chat
