#include "worker/tokenizer/bpe_trainer.h"

#include <map>

#include "absl/container/flat_hash_map.h"

namespace pkv {
namespace {

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Unique words with their frequencies, in byte order (std::map) so training never depends on hash
// iteration order.
std::vector<Word> CountWords(const std::vector<std::string>& words) {
  std::map<std::string, int64_t> counts;
  for (const std::string& w : words) {
    if (!w.empty()) ++counts[w];
  }
  std::vector<Word> out;
  out.reserve(counts.size());
  for (const auto& [bytes, count] : counts) {
    Word w;
    w.count = count;
    for (char c : bytes) w.symbols.push_back(static_cast<uint8_t>(c));
    out.push_back(std::move(w));
  }
  return out;
}

// The most frequent pair (ties: smallest (left bytes, right bytes)); false when none reaches
// min_count.
bool BestPair(const std::vector<Word>& words, const std::vector<std::string>& tokens,
              int64_t min_count, int32_t* left, int32_t* right) {
  absl::flat_hash_map<uint64_t, int64_t> counts;
  for (const Word& w : words) {
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      counts[PairKey(w.symbols[i], w.symbols[i + 1])] += w.count;
    }
  }
  int64_t best = 0;
  for (const auto& [key, count] : counts) {
    const auto l = static_cast<int32_t>(key >> 32);
    const auto r = static_cast<int32_t>(key & 0xFFFFFFFFu);
    const bool better =
        count > best ||
        (count == best &&
         (tokens[l] < tokens[*left] || (tokens[l] == tokens[*left] && tokens[r] < tokens[*right])));
    if (better) {
      best = count;
      *left = l;
      *right = r;
    }
  }
  return best >= min_count && best > 0;
}

void ApplyMerge(int32_t left, int32_t right, int32_t merged, std::vector<Word>* words) {
  for (Word& w : *words) {
    std::vector<int32_t>& s = w.symbols;
    size_t out = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
        s[out++] = merged;
        ++i;
      } else {
        s[out++] = s[i];
      }
    }
    s.resize(out);
  }
}

}  // namespace

BpeTrainingResult TrainByteLevelBpe(const std::vector<std::string>& words, int max_tokens,
                                    int64_t min_pair_count) {
  BpeTrainingResult result;
  for (int b = 0; b < 256; ++b) result.tokens.emplace_back(1, static_cast<char>(b));
  std::map<std::string, int32_t> ids;  // bytes -> id, to reuse tokens spelled the same way
  for (int b = 0; b < 256; ++b) ids[result.tokens[b]] = b;
  std::vector<Word> corpus = CountWords(words);
  while (static_cast<int>(result.tokens.size()) < max_tokens) {
    int32_t left = 0;
    int32_t right = 0;
    if (!BestPair(corpus, result.tokens, min_pair_count, &left, &right)) break;
    const std::string bytes = result.tokens[left] + result.tokens[right];
    auto [it, inserted] = ids.emplace(bytes, static_cast<int32_t>(result.tokens.size()));
    if (inserted) result.tokens.push_back(bytes);
    result.merges.emplace_back(left, right);
    ApplyMerge(left, right, it->second, &corpus);
  }
  return result;
}

}  // namespace pkv
