#include "tests/unit/tokenizer/test_util.h"

#include <unicode/unistr.h>

#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "worker/tokenizer/byte_level.h"

namespace pkv::testing {
namespace {

std::vector<std::string> SpecVocab(const TokenizerSpec& spec) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const auto& [l, r] : spec.merges) {
    const std::string m = l + r;
    bool found = false;
    for (const std::string& t : tokens) found = found || t == m;
    if (!found) tokens.push_back(m);
  }
  return tokens;
}

}  // namespace

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string MakeTokenizerJson(const TokenizerSpec& spec) {
  const std::vector<std::string> vocab = SpecVocab(spec);
  std::string json = "{\"version\":\"1.0\",\"added_tokens\":[";
  for (size_t i = 0; i < spec.added.size(); ++i) {
    const AddedTokenSpec& a = spec.added[i];
    absl::StrAppend(&json, i ? "," : "", "{\"id\":", a.id, ",\"content\":", JsonQuote(a.content),
                    ",\"single_word\":false,\"lstrip\":", a.lstrip ? "true" : "false",
                    ",\"rstrip\":", a.rstrip ? "true" : "false",
                    ",\"normalized\":", a.normalized ? "true" : "false",
                    ",\"special\":", a.special ? "true" : "false", "}");
  }
  absl::StrAppend(&json, "],\"normalizer\":", spec.normalizer,
                  ",\"pre_tokenizer\":", spec.pre_tokenizer,
                  ",\"post_processor\":", spec.post_processor,
                  ",\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",",
                  "\"ignore_merges\":", spec.ignore_merges ? "true" : "false", ",\"vocab\":{");
  for (size_t id = 0; id < vocab.size(); ++id) {
    absl::StrAppend(&json, id ? "," : "", JsonQuote(byte_level::Encode(vocab[id])), ":", id);
  }
  json += "},\"merges\":[";
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const std::string l = byte_level::Encode(spec.merges[i].first);
    const std::string r = byte_level::Encode(spec.merges[i].second);
    absl::StrAppend(&json, i ? "," : "",
                    spec.pair_merges ? absl::StrCat("[", JsonQuote(l), ",", JsonQuote(r), "]")
                                     : JsonQuote(l + " " + r));
  }
  return json + "]}}";
}

int32_t SpecTokenId(const TokenizerSpec& spec, const std::string& bytes) {
  const std::vector<std::string> vocab = SpecVocab(spec);
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i] == bytes) return static_cast<int32_t>(i);
  }
  return -1;
}

std::unique_ptr<Tokenizer> MakeTokenizer(const TokenizerSpec& spec) {
  auto t = Tokenizer::FromJson(MakeTokenizerJson(spec));
  if (!t.ok()) {
    std::fprintf(stderr, "MakeTokenizer: %s\n", t.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*t);
}

std::vector<std::string> NaiveBpe(const std::string& word,
                                  const std::vector<std::pair<std::string, std::string>>& merges) {
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < merges.size(); ++i) rank[merges[i]] = i;  // later duplicates win
  std::vector<std::string> parts;
  for (char c : word) parts.emplace_back(1, c);
  while (true) {
    size_t best_rank = SIZE_MAX;
    size_t best_pos = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find({parts[i], parts[i + 1]});
      if (it != rank.end() && it->second < best_rank) {
        best_rank = it->second;
        best_pos = i;
      }
    }
    if (best_rank == SIZE_MAX) return parts;
    parts[best_pos] += parts[best_pos + 1];
    parts.erase(parts.begin() + best_pos + 1);
  }
}

std::string RandomText(std::mt19937& rng, int max_chars) {
  static const char32_t kPool[] = {
      'a',   'b',    'c',    'e',    'x',      ' ',     ' ',     '\n',    '\t',   '1',   '9',
      '\'',  's',    '.',    ',',    '!',      '<',     '|',     '>',     0xE9,   0xFC,  0x301,
      0x308, 0x4E2D, 0x6587, 0x3042, 0xAC00,   0x1F600, 0x1F44D, 0x1F3FD, 0x200D, 0x627, 0x928,
      0x94D, 0x3000, 0xA0,   0x2028, 0x10FFFF, 0xFFFD,  0x7F,    0x0};
  std::uniform_int_distribution<int> len_dist(0, max_chars);
  std::uniform_int_distribution<size_t> pick(0, sizeof(kPool) / sizeof(kPool[0]) - 1);
  std::string out;
  for (int n = len_dist(rng); n > 0; --n) utf8::AppendChar(kPool[pick(rng)], &out);
  return out;
}

std::string IcuLossyUtf8(const std::string& bytes) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(
      icu::StringPiece(bytes.data(), static_cast<int32_t>(bytes.size())));
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace pkv::testing
