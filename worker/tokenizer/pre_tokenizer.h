// The tokenizer.json "pre_tokenizer": splits a text section into words before BPE. Supported:
//   Split     {"pattern": {"Regex": ..} | {"String": ..}, "behavior": "Isolated" | "Removed",
//              "invert": bool}
//   ByteLevel {"add_prefix_space", "use_regex" (GPT-2 pattern, default true)}
//   Sequence  {"pretokenizers": [...]}
// Byte-level BPE is the only model supported, so a ByteLevel step is required and must come last:
// words stay raw bytes here (the byte-to-character mapping is a storage detail of the vocabulary),
// which is only equivalent to Hugging Face's pipeline when nothing runs after ByteLevel.
// Immutable after construction; Split is thread-safe.
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

// The GPT-2 split pattern that ByteLevel applies when use_regex is true.
inline constexpr char kGpt2SplitPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // `config` is the "pre_tokenizer" member (nullptr when absent, which is an error: byte-level BPE
  // needs a ByteLevel step).
  static absl::StatusOr<PreTokenizer> FromJson(const JsonValue* config);

  // Appends the words of `text` (raw bytes, non-empty) to *words.
  // REQUIRES: `text` is well-formed UTF-8.
  absl::Status Split(std::string_view text, std::vector<std::string>* words) const;

 private:
  enum class Kind { kSplit, kByteLevel };
  struct Step {
    Kind kind;
    std::shared_ptr<const SplitRegex> regex;  // null for ByteLevel without use_regex
    bool keep_matches = true;                 // emit the regex matches as words
    bool keep_gaps = true;                    // emit the text between matches as words
    bool add_prefix_space = false;            // ByteLevel only
  };

  absl::Status AddFromJson(const JsonValue& config, int depth);
  absl::Status AddSplit(const JsonValue& config);
  absl::Status AddByteLevel(const JsonValue& config);
  absl::Status ApplyStep(const Step& step, std::string_view piece,
                         std::vector<std::string>* out) const;

  std::vector<Step> steps_;
};

}  // namespace pkv
