#include "worker/service/chat_prompt.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/log.h"

namespace pkv {

std::unique_ptr<ChatPromptRenderer> ChatPromptRenderer::Load(const std::string& model_dir) {
  std::unique_ptr<ChatPromptRenderer> r(new ChatPromptRenderer());
  absl::StatusOr<std::optional<chat::ModelChatTemplate>> loaded =
      chat::LoadModelChatTemplate(model_dir);
  if (!loaded.ok()) {
    r->unavailable_ = absl::InvalidArgumentError(
        absl::StrCat("this model's chat template cannot be read: ", loaded.status().message()));
  } else if (!loaded->has_value()) {
    r->unavailable_ = absl::InvalidArgumentError(absl::StrCat(
        "this model has no chat template (no \"chat_template\" in ", model_dir,
        "/tokenizer_config.json and no chat_template.jinja), so a chat cannot be formatted for "
        "it; send a plain prompt to /v1/completions instead, or add the model's template"));
  } else {
    absl::StatusOr<chat::ChatTemplate> compiled = chat::ChatTemplate::Compile((*loaded)->source);
    if (compiled.ok()) {
      r->template_ = std::move(*compiled);
      r->model_ = std::move(**loaded);
    } else {
      r->unavailable_ = absl::InvalidArgumentError(absl::StrCat(
          "this model's chat template is not supported: ", compiled.status().message()));
    }
  }
  if (!r->template_.has_value())
    PKV_LOG(INFO) << "chat requests refused: " << r->unavailable_.message();
  return r;
}

absl::StatusOr<std::string> ChatPromptRenderer::Render(const pkv::v1::ChatPrompt& chat) const {
  if (!template_.has_value()) return unavailable_;
  std::vector<JsonValue> messages;
  messages.reserve(chat.messages_size());
  for (const pkv::v1::ChatMessage& m : chat.messages()) {
    messages.push_back(JsonValue::Object(
        {{"role", JsonValue::String(m.role())}, {"content", JsonValue::String(m.content())}}));
  }
  absl::StatusOr<std::string> text =
      chat::RenderChat(*template_, model_, JsonValue::Array(std::move(messages)),
                       chat.add_generation_prompt(), JsonValue());
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's chat template refused this conversation: ", text.status().message()));
  }
  return text;
}

}  // namespace pkv
