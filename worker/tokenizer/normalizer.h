// The tokenizer.json "normalizer": Unicode normalization applied to input text (outside added
// tokens) before pre-tokenization. Supported: null, NFC, NFD, NFKC, NFKD and Sequence of these
// (Qwen2/Qwen3 use NFC; Llama-3 and byte-level Mistral use none). Backed by ICU's Normalizer2.
// Immutable after construction; Apply is thread-safe. The ICU normalizer instances are process-wide
// ICU singletons, not owned.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/json.h"

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
  absl::Status AddFromJson(const JsonValue& config, int depth);

  enum class Form { kNfc, kNfd, kNfkc, kNfkd };
  std::vector<Form> steps_;  // applied in order
};

}  // namespace pkv
