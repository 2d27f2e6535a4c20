// A small, deterministic byte-level BPE trainer (used to build the tiny test tokenizer; not meant
// for large corpora: every round recounts all pairs, O(rounds x corpus)).
//
// Start: 256 tokens, id b = the single byte b. Each round counts adjacent symbol pairs inside every
// word (weighted by the word's frequency; pairs never cross words), takes the most frequent pair
// (ties: the smallest (left bytes, right bytes), compared as unsigned bytes), records the merge and
// rewrites every word with it, left to right. The merged byte string becomes a new token unless an
// earlier merge already produced the same bytes. Training stops when the vocabulary reaches
// `max_tokens` or no pair occurs at least `min_pair_count` times. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pkv {

struct BpeTrainingResult {
  std::vector<std::string> tokens;                  // [num_tokens] raw bytes; id = index
  std::vector<std::pair<int32_t, int32_t>> merges;  // (left id, right id), in rank order
};

// `words`: the pre-tokenized corpus (raw bytes; repeats count). REQUIRES: max_tokens >= 256.
BpeTrainingResult TrainByteLevelBpe(const std::vector<std::string>& words, int max_tokens,
                                    int64_t min_pair_count);

}  // namespace pkv
