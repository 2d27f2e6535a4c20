// Builds the byte-level BPE tokenizer.json bundled with the tiny test/demo model written by
// pkv-make-model: 256 byte tokens, merges learned on a small built-in English corpus up to
// `vocab_size - 2` tokens, then the specials <|begin_of_text|> (vocab_size - 2) and
// <|end_of_text|> (vocab_size - 1, the EOS). Deterministic: same vocab_size, same bytes.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pkv {

// REQUIRES: 258 <= vocab_size <= 262144 (Llama-3: 128256; Qwen2: 151936).
absl::StatusOr<std::string> BuildTinyTokenizerJson(int vocab_size);

}  // namespace pkv
