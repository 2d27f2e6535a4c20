// Helpers for tokenizer tests: hand-made byte-level tokenizer.json files and an independent,
// deliberately naive BPE (the textbook loop) to compare the real merge loop against.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "worker/tokenizer/tokenizer.h"

namespace pkv::testing {

struct AddedTokenSpec {
  int32_t id;
  std::string content;
  bool special = true;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A byte-level BPE tokenizer.json: ids 0..255 are the single bytes in byte order; merge i (raw
// bytes) creates token 256 + k for each merge whose concatenation is new, in order.
struct TokenizerSpec {
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedTokenSpec> added;
  std::string normalizer = "null";  // JSON
  // JSON; default: ByteLevel without regex, i.e. the whole text section is one word.
  std::string pre_tokenizer = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false})";
  std::string post_processor = "null";  // JSON
  bool ignore_merges = false;
  bool pair_merges = false;  // write merges as ["a","b"] instead of "a b"
};

std::string MakeTokenizerJson(const TokenizerSpec& spec);
// Id of the raw-byte token `bytes` in a MakeTokenizerJson vocabulary (-1 if absent).
int32_t SpecTokenId(const TokenizerSpec& spec, const std::string& bytes);
std::unique_ptr<Tokenizer> MakeTokenizer(const TokenizerSpec& spec);

// Textbook BPE: while some adjacent pair has a merge, merge the occurrence with the lowest rank,
// leftmost first. Returns the resulting token byte strings.
std::vector<std::string> NaiveBpe(const std::string& word,
                                  const std::vector<std::pair<std::string, std::string>>& merges);

// A JSON string literal.
std::string JsonQuote(const std::string& s);

// Random well-formed UTF-8 text drawn from ASCII, Latin-1, CJK, emoji and combining marks.
std::string RandomText(std::mt19937& rng, int max_chars);

// Lossy UTF-8 decoding by ICU (the oracle for utf8::DecodeLossy): ill-formed subparts -> U+FFFD.
std::string IcuLossyUtf8(const std::string& bytes);

}  // namespace pkv::testing
