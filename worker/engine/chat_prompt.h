// Chat prompts at the worker: the model's own chat template (tokenizer_config.json
// "chat_template" or chat_template.jinja, chat_template/model_chat_template.h) compiled once at
// start-up, the rendering of a pkv.v1.ChatPrompt into text, and the prompt ids the engine feeds:
// that text encoded with special tokens recognized and none added (the template writes BOS itself
// where the model wants one, as Hugging Face's apply_chat_template(tokenize=True) does), so a
// model's BOS appears once, never doubled.
//
// Its own small library (pkv::chat_prompt) so that pkv-chat-render --tokenize runs this very code
// in the agreement test against transformers.js (tests/chat_template/tokenize_agree.mjs).
//
// A model without a template, or whose template does not compile, still serves text and token
// prompts; its chat requests get INVALID_ARGUMENT saying so (never an invented format).
//
// Thread-safety: immutable after Load; Render may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat_template/model_chat_template.h"
#include "chat_template/template.h"
#include "common/json.h"
#include "pkv/v1/common.pb.h"
#include "worker/tokenizer/tokenizer.h"

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
  // The prompt ids of `chat` as the engine feeds them: Render, then tokenizer.Encode(text,
  // add_special_tokens=false). Errors as Render's, and Encode's.
  absl::StatusOr<std::vector<int32_t>> Tokenize(const pkv::v1::ChatPrompt& chat,
                                                const Tokenizer& tokenizer) const;

  // The same two steps for a conversation given as JSON (an array of message objects, which may
  // carry more than role and content, e.g. tool_calls) with extra template variables (`extra`:
  // an object such as {"tools": [...]}, or null). Render(chat) is RenderJson of chat's messages
  // as {"role", "content"} objects with a null `extra`.
  absl::StatusOr<std::string> RenderJson(const JsonValue& messages, bool add_generation_prompt,
                                         const JsonValue& extra) const;
  absl::StatusOr<std::vector<int32_t>> TokenizeJson(const JsonValue& messages,
                                                    bool add_generation_prompt,
                                                    const JsonValue& extra,
                                                    const Tokenizer& tokenizer) const;

 private:
  ChatPromptRenderer() = default;

  std::optional<chat::ChatTemplate> template_;
  chat::ModelChatTemplate model_;
  absl::Status unavailable_;  // why there is no template (when template_ is empty)
};

}  // namespace pkv
