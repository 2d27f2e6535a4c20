// The few fields of a model's tokenizer_config.json (transformers) that change how text is
// encoded. Everything else in the file (chat template, padding, ...) is ignored here.
//   add_bos_token / add_eos_token  the special-token template: transformers' Llama and Gemma
//                                  tokenizers (tokenizer_class LlamaTokenizer[Fast],
//                                  CodeLlamaTokenizer[Fast], GemmaTokenizer[Fast]) rebuild the
//                                  post-processor from them (defaults true / false) whatever
//                                  tokenizer.json says; for other classes they apply when present.
//   bos_token / eos_token          strings, or {"content": ..} objects
//   legacy                         LlamaTokenizer only; false switches to transformers(.js)'s
//                                  non-legacy handling of spaces after special tokens.
// Plain data; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pkv {

struct TokenizerConfig {
  std::string tokenizer_class;  // without a trailing "Fast"
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<bool> legacy;

  // True for the classes whose transformers implementation rebuilds the post-processor from
  // add_bos_token / add_eos_token (see the file comment).
  bool RebuildsTemplate() const;
};

// Parses the text of a tokenizer_config.json. INVALID_ARGUMENT for malformed JSON or a used field
// of the wrong type.
absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view json);

}  // namespace pkv
