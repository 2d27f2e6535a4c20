// Where a model keeps its chat template, and rendering a conversation with it the way
// transformers' apply_chat_template does. Thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "chat_template/template.h"
#include "common/json.h"

namespace pkv::chat {

struct ModelChatTemplate {
  std::string source;                // the Jinja text
  std::string bos_token, eos_token;  // from tokenizer_config.json ("" when absent); these may be
                                     // strings or AddedToken objects {"content": ...}
};

// From a model directory: chat_template.jinja if present, else tokenizer_config.json's
// "chat_template" (a string, or a list of {"name","template"}: use "default"). nullopt when the
// model has none. Errors name the file.
absl::StatusOr<std::optional<ModelChatTemplate>> LoadModelChatTemplate(
    const std::string& model_dir);

// The same from the text of a tokenizer_config.json (`origin` names it in errors); the template
// itself is taken from `jinja_source` when that is set.
absl::StatusOr<std::optional<ModelChatTemplate>> ParseTokenizerConfigChatTemplate(
    std::string_view config_text, const std::string& origin,
    const std::optional<std::string>& jinja_source);

// Renders messages (a JSON array of {"role","content",...} objects as a client sent them) with
// the variables transformers passes: messages, add_generation_prompt, bos_token, eos_token, plus
// the members of `extra` (an object or null), e.g. tools; tools and documents are null when
// `extra` lacks them, as in transformers.
absl::StatusOr<std::string> RenderChat(const ChatTemplate& tmpl, const ModelChatTemplate& model,
                                       const pkv::JsonValue& messages, bool add_generation_prompt,
                                       const pkv::JsonValue& extra,
                                       const RenderOptions& options = {});

}  // namespace pkv::chat
