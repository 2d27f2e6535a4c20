// Chat prompts at the worker: the model's own chat template (tokenizer_config.json
// "chat_template" or chat_template.jinja, chat_template/model_chat_template.h) compiled once at
// start-up, and the rendering of a pkv.v1.ChatPrompt into the text the engine then encodes with
// special tokens recognized and none added (the template writes BOS itself where the model wants
// one, as Hugging Face's apply_chat_template + tokenize(add_special_tokens=False) does).
//
// A model without a template, or whose template does not compile, still serves text and token
// prompts; its chat requests get INVALID_ARGUMENT saying so (never an invented format).
//
// Thread-safety: immutable after Load; Render may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat_template/model_chat_template.h"
#include "chat_template/template.h"
#include "pkv/v1/common.pb.h"

namespace pkv {

class ChatPromptRenderer {
 public:
  // Reads the model folder. Never fails: an unreadable or uncompilable template is remembered as
  // the reason chat requests are refused (and logged once here).
  static std::unique_ptr<ChatPromptRenderer> Load(const std::string& model_dir);

  bool has_template() const { return template_.has_value(); }
  // The rendered conversation; INVALID_ARGUMENT when the model has no usable template or the
  // template refuses the conversation (raise_exception: its message).
  absl::StatusOr<std::string> Render(const pkv::v1::ChatPrompt& chat) const;

 private:
  ChatPromptRenderer() = default;

  std::optional<chat::ChatTemplate> template_;
  chat::ModelChatTemplate model_;
  absl::Status unavailable_;  // why there is no template (when template_ is empty)
};

}  // namespace pkv
