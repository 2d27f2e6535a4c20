// The tokenizer.json "decoder", reduced to what PersistentKV needs to turn ids back into text one
// token at a time: the raw bytes each token stands for, and how many leading characters the whole
// sequence loses. Supported:
//   byte-level models: null or ByteLevel (token bytes are the byte-level vocabulary decoded);
//   SentencePiece-style models: Sequence (or a single step) of
//     Replace     {"pattern": {"String": s}, "content": c}  every s in a token becomes c ("▁" -> "
//     ") ByteFallback                                         a "<0xNN>" token is the byte NN Fuse
//     concatenation (always done) Strip       {"content": ch, "start": n, "stop": 0}   after Fuse:
//     the decoded sequence loses
//                                                          up to n leading ch (Llama 2: one space);
//                                                          before Fuse: every token does
//     Metaspace   {"replacement", "prepend_scheme"}        replacement -> " ", and unless the
//                                                          scheme is "never", one leading space of
//                                                          the sequence is dropped.
// Differences from Hugging Face, by design: token bytes are concatenated raw, so a byte-fallback
// run that is not valid UTF-8 becomes U+FFFD per maximal ill-formed subpart (utf8::DecodeLossy)
// instead of one U+FFFD per byte token; a Replace pattern is matched within single tokens.
// Immutable after construction; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace pkv {

class Decoder {
 public:
  // `config` is the "decoder" member or nullptr. `byte_level` tells which family the model is.
  // Anything else gives INVALID_ARGUMENT naming it (e.g. a missing decoder for a
  // SentencePiece-style model, which Hugging Face would decode by joining tokens with spaces).
  static absl::StatusOr<Decoder> FromJson(const JsonValue* config, bool byte_level);

  // The raw bytes of a token whose vocabulary string (or added-token content) is `piece`.
  // Byte-level models: `piece` unchanged (the caller has already decoded the alphabet).
  std::string PieceBytes(std::string_view piece) const;

  // Drops from the front of *text up to *remaining copies of the sequence-level strip character,
  // decrementing *remaining; once any other character is seen *remaining becomes 0. Start with
  // *remaining = strip_count() at the beginning of a sequence. REQUIRES: *text is valid UTF-8.
  void StripStart(std::string* text, int* remaining) const;
  int strip_count() const { return strip_count_; }

 private:
  enum class Kind { kReplace, kByteFallback, kStrip };
  struct Step {
    Kind kind;
    std::string from;  // Replace: pattern; Strip: the character
    std::string to;    // Replace: content
    int start = 0;     // Strip (per token)
    int stop = 0;      // Strip (per token)
  };

  absl::Status AddFromJson(const JsonValue& config, int depth);
  absl::Status AddStrip(const JsonValue& config);

  std::vector<Step> steps_;  // per-token steps, in order
  bool fused_ = false;       // a Fuse step was seen: later steps act on the whole sequence
  std::string strip_char_;   // sequence-level strip
  int strip_count_ = 0;
};

}  // namespace pkv
