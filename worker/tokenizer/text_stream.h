// Incremental detokenization of one request's generated tokens, with stop strings.
//
// Fed one token id at a time, a TextStream returns the text that is safe to emit now:
//   - it never splits a UTF-8 character: the bytes of an incomplete character are held back until
//     it completes, and become U+FFFD (one per maximal ill-formed subpart, see utf8.h) once they
//     are known to be invalid;
//   - it never emits text that might be the start of a stop string: the longest suffix of the
//     pending text that is a proper prefix of some stop string is held back;
//   - when a stop string appears, it emits only the text before it and stops; later tokens are
//     ignored. When several stop strings are complete at once, the one that ends first wins (ties:
//     the one that starts first), i.e. the one a character-by-character stream would have seen
//     first, so the result does not depend on how the text was split into tokens.
//   - byte-fallback tokens ("<0xNN>") contribute their byte, so a character spread over several of
//     them is emitted once its last byte arrives;
//   - the decoder's leading strip (Llama 2: one space, see decoder.h) applies only with
//     strip_sequence_start: it undoes the "▁" that encoding prepends to a text's start, so it fits
//     a stream that decodes a whole text, not generated tokens that continue a prompt (there a
//     leading "▁" is a real space: "The capital is" + " Paris").
// Invariant: the concatenation of all deltas and Flush() equals the lossy UTF-8 decoding of
// Tokenizer::Decode of all fed tokens (without its leading strip unless strip_sequence_start),
// cut before the first stop string.
//
// Prime() absorbs tokens that were already streamed elsewhere (a request migrated from another
// worker) without emitting them; afterwards the stream is in exactly the state an uninterrupted
// stream would be in, so deltas continue seamlessly.
//
// Not thread-safe: one TextStream per request, used by one thread at a time. The Tokenizer is not
// owned and must outlive the stream.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {

class TextStream {
 public:
  struct Delta {
    std::string text;      // safe to emit now (well-formed UTF-8, possibly empty)
    bool stopped = false;  // a stop string matched (now or earlier); nothing more will be emitted
  };

  // Empty stop strings and ones that are not well-formed UTF-8 are ignored (never match); a
  // well-formed one can only match on character boundaries, so the output stays well-formed. With
  // skip_special_tokens, special added tokens contribute no text (they still count as tokens).
  TextStream(const Tokenizer* tokenizer, std::vector<std::string> stop_strings,
             bool skip_special_tokens = true, bool strip_sequence_start = false);

  // Feeds one generated token.
  Delta Push(int32_t token_id);

  // Feeds tokens whose text was already emitted by someone else, discarding their deltas.
  void Prime(absl::Span<const int32_t> token_ids);

  // End of generation: returns everything still held back (a dangling partial character becomes
  // U+FFFD). Returns "" after a stop. The stream is finished afterwards.
  std::string Flush();

  bool stopped() const { return stop_index_ >= 0; }
  // Index into the constructor's stop_strings of the matched stop string, or -1.
  int stop_index() const { return stop_index_; }
  // The matched stop string ("" when none).
  std::string_view stop_string() const {
    return stop_index_ >= 0 ? std::string_view(stop_strings_[stop_index_]) : std::string_view();
  }

 private:
  // Appends newly decoded text to pending_, checks for stop strings, and returns what may be
  // emitted now.
  std::string Advance(const std::string& new_text, bool final);
  // Earliest-ending stop string match in pending_ (ties: earliest start). False when none.
  bool FindStop(size_t* match_begin, int* which) const;
  // Length of the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t HoldBackLength() const;

  const Tokenizer* tokenizer_;             // not owned
  std::vector<std::string> stop_strings_;  // as given, including ignored ones
  std::vector<bool> usable_;               // [stop_strings_.size()]: non-empty, valid UTF-8
  bool skip_special_tokens_;
  std::string partial_bytes_;  // an incomplete UTF-8 character (<= 3 bytes)
  std::string pending_;        // decoded text not yet emitted (could start a stop string)
  int strip_remaining_;        // leading strip characters still to drop (decoder.h)
  int stop_index_ = -1;
  bool finished_ = false;
};

}  // namespace pkv
