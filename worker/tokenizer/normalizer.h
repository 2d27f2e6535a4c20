// The tokenizer.json "normalizer": rewrites input text (outside added tokens) before
// pre-tokenization. Supported: null, NFC, NFD, NFKC, NFKD (ICU's Normalizer2), Replace (a literal
// {"String": ..} or {"Regex": ..} pattern, every match replaced by "content"), Prepend ("prepend"
// put in front of non-empty text) and Sequence of these. Qwen2/Qwen3 use NFC; Llama-3 and
// byte-level Mistral none; SentencePiece-style BPE turns spaces into "▁" with Replace, and Llama 2
// prepends "▁" with Prepend (once per text section, i.e. also after each special token: the
// "legacy" behaviour).
// Immutable after construction; Apply is thread-safe. The ICU normalizer instances are process-wide
// ICU singletons, not owned.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/json.h"
#include "worker/tokenizer/regex.h"

namespace pkv {

class Normalizer {
 public:
  // `config` is the "normalizer" member, or nullptr when absent. Unsupported types give
  // INVALID_ARGUMENT naming the type and listing the supported ones.
  static absl::StatusOr<Normalizer> FromJson(const JsonValue* config);

  bool is_identity() const { return steps_.empty(); }

  // Writes the normalized form of `text` to *out. REQUIRES: `text` is well-formed UTF-8.
  absl::Status Apply(std::string_view text, std::string* out) const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kReplace, kPrepend };
  struct Step {
    Kind kind;
    std::string literal;                      // Replace {"String"}: the text replaced
    std::shared_ptr<const SplitRegex> regex;  // Replace {"Regex"}: the pattern replaced
    std::string content;                      // Replace: the replacement; Prepend: the prefix
  };

  absl::Status AddFromJson(const JsonValue& config, int depth);
  absl::Status AddReplace(const JsonValue& config);
  static absl::Status ApplyUnicode(Kind kind, std::string* text);
  static absl::Status ApplyReplace(const Step& step, std::string* text);

  std::vector<Step> steps_;  // applied in order
};

}  // namespace pkv
