#include "worker/engine/chat_prompt.h"

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

namespace {

JsonValue MessagesJson(const pkv::v1::ChatPrompt& chat) {
  std::vector<JsonValue> messages;
  messages.reserve(chat.messages_size());
  for (const pkv::v1::ChatMessage& m : chat.messages()) {
    messages.push_back(JsonValue::Object(
        {{"role", JsonValue::String(m.role())}, {"content", JsonValue::String(m.content())}}));
  }
  return JsonValue::Array(std::move(messages));
}

// The template wrote the special tokens (BOS included) itself: recognize them, add none.
absl::StatusOr<std::vector<int32_t>> EncodeRendered(absl::StatusOr<std::string> text,
                                                    const Tokenizer& tokenizer) {
  if (!text.ok()) return text.status();
  return tokenizer.Encode(*text, /*add_special_tokens=*/false);
}

}  // namespace

absl::StatusOr<std::string> ChatPromptRenderer::RenderJson(const JsonValue& messages,
                                                           bool add_generation_prompt,
                                                           const JsonValue& extra) const {
  if (!template_.has_value()) return unavailable_;
  absl::StatusOr<std::string> text =
      chat::RenderChat(*template_, model_, messages, add_generation_prompt, extra);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's chat template refused this conversation: ", text.status().message()));
  }
  return text;
}

absl::StatusOr<std::string> ChatPromptRenderer::Render(const pkv::v1::ChatPrompt& chat) const {
  if (!template_.has_value()) return unavailable_;
  return RenderJson(MessagesJson(chat), chat.add_generation_prompt(), JsonValue());
}

absl::StatusOr<std::vector<int32_t>> ChatPromptRenderer::Tokenize(
    const pkv::v1::ChatPrompt& chat, const Tokenizer& tokenizer) const {
  return EncodeRendered(Render(chat), tokenizer);
}

absl::StatusOr<std::vector<int32_t>> ChatPromptRenderer::TokenizeJson(
    const JsonValue& messages, bool add_generation_prompt, const JsonValue& extra,
    const Tokenizer& tokenizer) const {
  return EncodeRendered(RenderJson(messages, add_generation_prompt, extra), tokenizer);
}

}  // namespace pkv
