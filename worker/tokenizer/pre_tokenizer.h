// The tokenizer.json "pre_tokenizer": splits a text section into words before BPE. Supported:
//   Split     {"pattern": {"Regex": ..} | {"String": ..}, "invert": bool, "behavior": "Isolated" |
//              "Removed" | "MergedWithPrevious" | "MergedWithNext" | "Contiguous"}
//   ByteLevel {"add_prefix_space", "use_regex" (GPT-2 pattern, default true)}
//   Metaspace {"replacement" (one character, e.g. "▁"), "prepend_scheme": "always" | "first" |
//              "never" (older files: "add_prefix_space": true = always), "split" (default true)}
//   Sequence  {"pretokenizers": [...]}
//   null      (the whole section is one word: Llama 2's SentencePiece-style files)
// A pipeline with a ByteLevel step is byte-level (byte_level() is true); that step must come last:
// words stay raw bytes here (the byte-to-character mapping is a storage detail of the vocabulary),
// which is only equivalent to Hugging Face's pipeline when nothing runs after ByteLevel. Without
// ByteLevel, words are UTF-8 text for a SentencePiece-style (character-level) BPE.
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
  // `config` is the "pre_tokenizer" member (nullptr or null when absent: no splitting).
  static absl::StatusOr<PreTokenizer> FromJson(const JsonValue* config);

  // A Metaspace pre-tokenizer with the given prepend scheme and split=true (what transformers'
  // LlamaTokenizer installs for legacy=false). REQUIRES: scheme is "always", "first" or "never".
  static PreTokenizer Metaspace(std::string_view replacement, std::string_view scheme, bool split);

  // True when the pipeline ends in ByteLevel (byte-level BPE).
  bool byte_level() const { return !steps_.empty() && steps_.back().kind == Kind::kByteLevel; }

  // Appends the words of `text` (non-empty) to *words. `first_section` tells whether `text` starts
  // at the beginning of the input (Metaspace prepend_scheme "first" only prepends there).
  // REQUIRES: `text` is well-formed UTF-8.
  absl::Status Split(std::string_view text, bool first_section,
                     std::vector<std::string>* words) const;

 private:
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    Kind kind;
    std::shared_ptr<const SplitRegex> regex;  // null for ByteLevel without use_regex
    Behavior behavior = Behavior::kIsolated;  // what happens to the delimiters
    bool invert = false;                      // the delimiters are the text between matches
    bool add_prefix_space = false;            // ByteLevel only
    std::string replacement;                  // Metaspace only
    Prepend prepend = Prepend::kAlways;       // Metaspace only
  };

  absl::Status AddFromJson(const JsonValue& config, int depth);
  absl::Status AddSplit(const JsonValue& config);
  absl::Status AddByteLevel(const JsonValue& config);
  absl::Status AddMetaspace(const JsonValue& config);
  struct Piece {
    std::string text;
    bool at_start;  // starts at the beginning of the input
  };
  absl::Status ApplyStep(const Step& step, const Piece& piece, std::vector<Piece>* out) const;

  std::vector<Step> steps_;
};

}  // namespace pkv
