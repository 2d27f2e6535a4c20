// The tokenizer.json "post_processor", reduced to what it does to a single sequence's ids: special
// tokens added before and after it when the caller asks for special tokens (e.g. Llama-3's
// <|begin_of_text|>). Supported: null, ByteLevel (offsets only: no ids), TemplateProcessing (its
// "single" template) and Sequence of these. Plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace pkv {

struct PostProcessor {
  std::vector<int32_t> prefix;  // ids before the sequence
  std::vector<int32_t> suffix;  // ids after the sequence
};

// `config` is the "post_processor" member or nullptr. Unsupported types, a template without exactly
// one $A, or a SpecialToken missing from "special_tokens" give INVALID_ARGUMENT.
absl::StatusOr<PostProcessor> ParsePostProcessor(const JsonValue* config);

}  // namespace pkv
