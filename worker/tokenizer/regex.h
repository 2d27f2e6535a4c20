// A compiled split pattern for pre-tokenization, backed by PCRE2 in UTF + UCP mode (JIT when
// available). Hugging Face tokenizers compile these patterns with Oniguruma; PCRE2 shares its
// leftmost-first backtracking semantics, look-ahead, \p{..} classes and (?i:..) groups. The few
// spellings that differ are rewritten before compiling:
//   \s, \S   -> \p{White_Space}, \P{White_Space}  (Oniguruma's Unicode \s is exactly White_Space;
//               PCRE2's UCP \s also matches U+180E MONGOLIAN VOWEL SEPARATOR, which left
//               White_Space in Unicode 6.3; Hugging Face's Rust tokenizers agree with the rewrite,
//               see tests/tokenizer/corpus_hf_only.jsonl)
//   \uHHHH   -> \x{HHHH}
//   \h, \H   -> rejected (hex digit in Oniguruma, horizontal space in PCRE2)
// Immutable after construction: FindAll may be called from many threads at once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

typedef struct pcre2_real_code_8 pcre2_code_8;

namespace pkv {

class SplitRegex {
 public:
  // Compiles an Oniguruma-syntax pattern; INVALID_ARGUMENT names the pattern and the PCRE2 error.
  static absl::StatusOr<std::unique_ptr<SplitRegex>> Compile(std::string_view pattern);
  // Compiles a pattern that matches `literal` verbatim (tokenizer.json {"String": ...} patterns).
  static absl::StatusOr<std::unique_ptr<SplitRegex>> CompileLiteral(std::string_view literal);

  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Appends the [begin, end) byte ranges of the successive non-overlapping, non-empty matches in
  // `text`. As in Oniguruma's and Rust's find-all, after an empty match at p the search resumes at
  // the next character. Fails (RESOURCE_EXHAUSTED) only when PCRE2 hits its match or memory limits.
  // REQUIRES: `text` is well-formed UTF-8.
  absl::Status FindAll(std::string_view text,
                       std::vector<std::pair<size_t, size_t>>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  SplitRegex(std::string pattern, pcre2_code_8* code) : pattern_(std::move(pattern)), code_(code) {}
  static absl::StatusOr<std::unique_ptr<SplitRegex>> CompileImpl(std::string_view shown,
                                                                 std::string_view pcre_pattern,
                                                                 bool literal);

  std::string pattern_;  // as written in tokenizer.json, for error messages
  pcre2_code_8* code_;   // owned
};

// Rewrites an Oniguruma-syntax pattern into PCRE2 syntax (see the file comment). Exposed for tests.
absl::StatusOr<std::string> TranslateOnigurumaPattern(std::string_view pattern);

}  // namespace pkv
