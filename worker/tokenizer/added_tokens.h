// Added tokens of a tokenizer.json ("added_tokens"): strings such as <|im_start|> or <think> that
// are cut out of the input before normalization and pre-tokenization and map straight to their id.
// Matching is leftmost-longest over all added tokens, as Hugging Face's Aho-Corasick matcher does.
// lstrip/rstrip tokens also swallow the Unicode whitespace on that side of them.
// Immutable after construction; Split is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/json.h"

namespace pkv {

struct AddedToken {
  int32_t id = 0;
  std::string content;      // UTF-8, non-empty
  bool special = false;     // a control token (skipped by decoders that skip special tokens)
  bool lstrip = false;      // swallows whitespace on its left
  bool rstrip = false;      // swallows whitespace on its right
  bool normalized = false;  // matched in normalized text (after the normalizer) instead of raw
};

// Parses the "added_tokens" array (nullptr or null: none). single_word=true is rejected.
absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const JsonValue* list);

// True for Unicode White_Space characters (what Rust's char::is_whitespace accepts).
bool IsUnicodeWhitespace(char32_t cp);

class AddedTokenMatcher {
 public:
  struct Segment {
    std::string_view text;  // a view into the text given to Split
    int32_t token;          // index into the tokens given to Build, or -1 for plain text
  };

  // Builds a matcher over tokens[i] for every i with tokens[i].normalized == normalized. For
  // normalized tokens `contents[i]` (the normalized content) is matched instead of the content.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, const std::vector<std::string>& contents,
                    bool normalized);

  bool empty() const { return num_patterns_ == 0; }

  // Cuts `text` into plain segments (never empty) and added-token matches, in order.
  void Split(std::string_view text, std::vector<Segment>* out) const;

 private:
  struct Node {
    int32_t token = -1;  // index of the token ending here, or -1
    bool lstrip = false;
    bool rstrip = false;
  };
  int32_t Child(int32_t node, uint8_t byte) const;
  // Longest token starting at `pos`: returns its node or -1; *end receives the end offset.
  int32_t LongestAt(std::string_view text, size_t pos, size_t* end) const;

  std::vector<Node> nodes_;                       // [num_nodes]; node 0 is the root
  absl::flat_hash_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  bool first_byte_[256] = {};                     // some token starts with this byte
  int num_patterns_ = 0;
};

}  // namespace pkv
