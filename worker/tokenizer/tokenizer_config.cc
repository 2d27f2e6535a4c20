#include "worker/tokenizer/tokenizer_config.h"

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace pkv {
namespace {

absl::StatusOr<std::optional<bool>> OptionalBool(const JsonValue& root, std::string_view name) {
  const JsonValue* v = root.Find(name);
  if (v == nullptr || v->is_null()) return std::optional<bool>();
  if (!v->is_bool()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer_config.json: '",
                                                   absl::string_view(name.data(), name.size()),
                                                   "' must be a boolean"));
  }
  return std::optional<bool>(v->bool_value());
}

// A token is written as a string or as an AddedToken object {"content": ...}.
absl::StatusOr<std::optional<std::string>> OptionalToken(const JsonValue& root,
                                                         std::string_view name) {
  const JsonValue* v = root.Find(name);
  if (v == nullptr || v->is_null()) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->str());
  const JsonValue* content = v->is_object() ? v->Find("content") : nullptr;
  if (content != nullptr && content->is_string()) {
    return std::optional<std::string>(content->str());
  }
  return absl::InvalidArgumentError(absl::StrCat("tokenizer_config.json: '",
                                                 absl::string_view(name.data(), name.size()),
                                                 "' must be a string or {\"content\": string}"));
}

}  // namespace

bool TokenizerConfig::RebuildsTemplate() const {
  return tokenizer_class == "LlamaTokenizer" || tokenizer_class == "CodeLlamaTokenizer" ||
         tokenizer_class == "GemmaTokenizer";
}

absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view json) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer_config.json: ", root.status().message()));
  }
  if (!root->is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json: not a JSON object");
  }
  TokenizerConfig c;
  if (const JsonValue* cls = root->Find("tokenizer_class"); cls != nullptr && cls->is_string()) {
    c.tokenizer_class = cls->str();
    constexpr std::string_view kFast = "Fast";
    if (c.tokenizer_class.size() > kFast.size() &&
        std::string_view(c.tokenizer_class).substr(c.tokenizer_class.size() - kFast.size()) ==
            kFast) {
      c.tokenizer_class.resize(c.tokenizer_class.size() - kFast.size());
    }
  }
  PKV_ASSIGN_OR_RETURN(c.add_bos_token, OptionalBool(*root, "add_bos_token"));
  PKV_ASSIGN_OR_RETURN(c.add_eos_token, OptionalBool(*root, "add_eos_token"));
  PKV_ASSIGN_OR_RETURN(c.legacy, OptionalBool(*root, "legacy"));
  PKV_ASSIGN_OR_RETURN(c.bos_token, OptionalToken(*root, "bos_token"));
  PKV_ASSIGN_OR_RETURN(c.eos_token, OptionalToken(*root, "eos_token"));
  return c;
}

}  // namespace pkv
