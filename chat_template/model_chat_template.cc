#include "chat_template/model_chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::chat {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ss.str();
}

// A special token written as a string or as an AddedToken object {"content": ...}.
absl::StatusOr<std::string> TokenText(const JsonValue& config, std::string_view name,
                                      const std::string& origin) {
  const JsonValue* v = config.Find(name);
  if (v == nullptr || v->is_null()) return std::string();
  if (v->is_string()) return v->str();
  if (v->is_object()) {
    const JsonValue* content = v->Find("content");
    if (content != nullptr && content->is_string()) return content->str();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      origin, ": '", std::string(name), "' must be a string or an object with \"content\""));
}

absl::StatusOr<std::optional<std::string>> TemplateFromConfig(const JsonValue& config,
                                                              const std::string& origin) {
  const JsonValue* t = config.Find("chat_template");
  if (t == nullptr || t->is_null()) return std::optional<std::string>();
  if (t->is_string()) return std::optional<std::string>(t->str());
  if (t->is_array()) {
    for (const JsonValue& item : t->items()) {
      const JsonValue* name = item.Find("name");
      const JsonValue* text = item.Find("template");
      if (name && name->is_string() && name->str() == "default" && text && text->is_string()) {
        return std::optional<std::string>(text->str());
      }
    }
    return std::optional<std::string>();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(origin, ": 'chat_template' must be a string or a list of named templates"));
}

}  // namespace

absl::StatusOr<std::optional<ModelChatTemplate>> ParseTokenizerConfigChatTemplate(
    std::string_view config_text, const std::string& origin,
    const std::optional<std::string>& jinja_source) {
  absl::StatusOr<JsonValue> config = ParseJson(config_text);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", config.status().message()));
  }
  if (!config->is_object())
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not an object"));
  ModelChatTemplate model;
  PKV_ASSIGN_OR_RETURN(model.bos_token, TokenText(*config, "bos_token", origin));
  PKV_ASSIGN_OR_RETURN(model.eos_token, TokenText(*config, "eos_token", origin));
  if (jinja_source) {
    model.source = *jinja_source;
    return std::optional<ModelChatTemplate>(std::move(model));
  }
  PKV_ASSIGN_OR_RETURN(std::optional<std::string> source, TemplateFromConfig(*config, origin));
  if (!source) return std::optional<ModelChatTemplate>();
  model.source = std::move(*source);
  return std::optional<ModelChatTemplate>(std::move(model));
}

absl::StatusOr<std::optional<ModelChatTemplate>> LoadModelChatTemplate(
    const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string jinja_path = (fs::path(model_dir) / "chat_template.jinja").string();
  const std::string config_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  std::optional<std::string> jinja;
  if (fs::exists(jinja_path, ec)) {
    PKV_ASSIGN_OR_RETURN(std::string text, ReadFile(jinja_path));
    jinja = std::move(text);
  }
  if (!fs::exists(config_path, ec)) {
    if (!jinja) return std::optional<ModelChatTemplate>();
    ModelChatTemplate model;
    model.source = std::move(*jinja);
    return std::optional<ModelChatTemplate>(std::move(model));
  }
  PKV_ASSIGN_OR_RETURN(std::string config_text, ReadFile(config_path));
  return ParseTokenizerConfigChatTemplate(config_text, config_path, jinja);
}

absl::StatusOr<std::string> RenderChat(const ChatTemplate& tmpl, const ModelChatTemplate& model,
                                       const pkv::JsonValue& messages, bool add_generation_prompt,
                                       const pkv::JsonValue& extra, const RenderOptions& options) {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object()) {
    return absl::InvalidArgumentError("extra template variables must be a JSON object");
  }
  std::vector<JsonValue::Member> members;
  if (extra.is_object()) members = extra.members();
  auto set = [&members](std::string name, JsonValue value) {
    for (auto& m : members) {
      if (m.first == name) {
        m.second = std::move(value);
        return;
      }
    }
    members.emplace_back(std::move(name), std::move(value));
  };
  // transformers passes tools and documents as None when the caller gives none.
  auto set_default = [&members, &set](std::string name) {
    for (const auto& m : members) {
      if (m.first == name) return;
    }
    set(std::move(name), JsonValue());
  };
  set_default("tools");
  set_default("documents");
  set("messages", messages);
  set("add_generation_prompt", JsonValue::Bool(add_generation_prompt));
  set("bos_token", JsonValue::String(model.bos_token));
  set("eos_token", JsonValue::String(model.eos_token));
  return tmpl.Render(JsonValue::Object(std::move(members)), options);
}

}  // namespace pkv::chat
