// The tokenizer.json "model" of type BPE: a vocabulary and a ranked list of merges. A word starts
// as a sequence of symbols and the lowest-ranked adjacent pair is merged repeatedly, leftmost first
// among equal ranks, until no pair has a merge (the algorithm of GPT-2 and of Hugging Face
// tokenizers). Two flavours, chosen by the caller from the pre-tokenizer:
//   byte-level (GPT-2, Llama 3, Qwen): a word is raw bytes and starts as one symbol per byte. The
//     vocabulary strings in tokenizer.json are written in the byte-level alphabet (byte_level.h);
//     they are decoded once at load time, so the vocabulary is keyed by raw bytes.
//   character-level (SentencePiece-style BPE: Llama 2, Mistral v0.1, Gemma, Yi): a word is UTF-8
//     text (spaces already turned into "▁" by the normalizer or pre-tokenizer) and starts as one
//     symbol per character, the character's vocabulary token. A character missing from the
//     vocabulary becomes, with byte_fallback, one "<0xNN>" token per UTF-8 byte (when all of them
//     exist), else the unk_token (consecutive ones fused into one with fuse_unk), else nothing;
//     exactly Hugging Face's BPE::merge_word, including where a pending unk lands. Vocabulary
//     strings are used as they are.
// Merges are keyed by pairs of token ids. A merge (a, b) is one hash lookup of the 64-bit key
// (id_a, id_b) giving (rank, merged id); the merge loop runs over a linked list of symbols with a
// min-heap of candidate pairs keyed by (rank, position): O(n log n) per word.
//
// Thread-safety: immutable after construction except for the word cache, which is guarded by an
// internal mutex; EncodeWord may be called from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/json.h"

namespace pkv {

// Vocabulary ids above this are rejected so that a small hostile file cannot make us allocate
// gigabytes (per-id tables are sized by the largest id). Real vocabularies stay below 2^18.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 21) - 1;

class BpeModel {
 public:
  // `model` is the tokenizer.json "model" object. Rejects (INVALID_ARGUMENT, naming the field)
  // anything but type "BPE" without dropout and subword prefixes/suffixes; merges that reference
  // tokens missing from the vocab; byte_fallback in a byte-level model; a byte-level vocab lacking
  // any of the 256 byte tokens; an unk_token missing from the vocab.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const JsonValue& model,
                                                            bool byte_level = true);

  // Appends the ids of one pre-tokenized word (raw bytes; character-level: UTF-8 text).
  // REQUIRES (character-level): `word` is well-formed UTF-8.
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  // The id of the vocabulary token whose raw bytes (character-level: text) are `bytes`, if any.
  std::optional<int32_t> TokenId(std::string_view bytes) const;

  // 1 + the largest id in the vocabulary.
  int32_t num_ids() const { return static_cast<int32_t>(id_to_bytes_.size()); }
  // Raw bytes (character-level: the vocabulary string, e.g. "▁the" or "<0x0A>") of token `id`
  // (empty for an id the vocabulary does not define). REQUIRES: 0 <= id < num_ids().
  const std::string& TokenBytes(int32_t id) const { return id_to_bytes_[id]; }
  size_t num_merges() const { return merges_.size(); }
  bool byte_level() const { return byte_level_; }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  struct Merge {
    int32_t rank;    // position in the merges list; lower merges first
    int32_t new_id;  // id of the concatenated token
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  BpeModel() = default;
  absl::Status LoadVocab(const JsonValue& vocab);
  absl::Status LoadSpecialIds(const JsonValue& model);
  absl::Status LoadMerges(const JsonValue& merges);
  absl::Status AddMerge(size_t rank, std::string_view left, std::string_view right);
  // Raw bytes of a vocabulary string (byte-level: decoded from the alphabet); false if invalid.
  bool TokenKey(std::string_view token, std::string* key) const;
  // The initial symbols of a word: one per byte, or (character-level) as described on top.
  void ByteSymbols(std::string_view word, std::vector<int32_t>* symbols) const;
  void CharSymbols(std::string_view word, std::vector<int32_t>* symbols) const;
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;

  bool byte_level_ = true;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;                              // -1: no unk_token
  absl::flat_hash_map<std::string, int32_t> vocab_;  // raw bytes (character-level: text) -> id
  std::vector<std::string> id_to_bytes_;             // [num_ids]
  // Byte-level: id of the single-byte token of each byte. Character-level with byte_fallback: id
  // of "<0xNN>" for byte NN, or -1.
  int32_t byte_ids_[256] = {};
  int32_t ascii_ids_[128] = {};                  // character-level: id of each ASCII char, or -1
  absl::flat_hash_map<uint64_t, Merge> merges_;  // PairKey(left, right) -> merge
  bool ignore_merges_ = false;  // a word that is itself a vocab token is emitted whole

  // Words already encoded. Bounded: once full, new words are no longer cached.
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedWordBytes = 256;
  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace pkv
