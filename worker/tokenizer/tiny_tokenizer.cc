#include "worker/tokenizer/tiny_tokenizer.h"

#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/tokenizer/bpe_trainer.h"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/regex.h"
#include "worker/tokenizer/tiny_corpus.h"

namespace pkv {
namespace {

// The Llama-3 pre-tokenizer pattern (digits in groups of up to three).
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kBos[] = "<|begin_of_text|>";
constexpr char kEos[] = "<|end_of_text|>";
// Every pair that occurs in the corpus may be merged; once the corpus is exhausted (each word one
// token) the remaining ids are filled with reserved special tokens, as Llama-3 does.
constexpr int64_t kMinPairCount = 1;

// A JSON string literal for UTF-8 text `s`.
std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string AddedTokenJson(int id, std::string_view content) {
  return absl::StrCat("{\"id\":", id, ",\"content\":", JsonQuote(content),
                      ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                      "\"normalized\":false,\"special\":true}");
}

std::string PipelineJson() {
  const std::string bos_item =
      absl::StrCat("{\"SpecialToken\":{\"id\":", JsonQuote(kBos), ",\"type_id\":0}}");
  const std::string bos_item1 =
      absl::StrCat("{\"SpecialToken\":{\"id\":", JsonQuote(kBos), ",\"type_id\":1}}");
  return absl::StrCat(
      "\"normalizer\":null,\n"
      "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
      "{\"type\":\"Split\",\"pattern\":{\"Regex\":",
      JsonQuote(kLlama3Pattern),
      "},\"behavior\":\"Isolated\",\"invert\":false},"
      "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
      "\"use_regex\":false}]},\n"
      "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[",
      bos_item, ",{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[", bos_item,
      ",{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},", bos_item1,
      ",{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{", JsonQuote(kBos),
      ":{\"id\":", JsonQuote(kBos), ",\"ids\":[BOS_ID],\"tokens\":[", JsonQuote(kBos), "]}}},\n",
      "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
      "\"use_regex\":true},\n");
}

std::string ModelJson(const BpeTrainingResult& bpe) {
  std::string out =
      "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
      "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,"
      "\"byte_fallback\":false,\"ignore_merges\":true,\n\"vocab\":{";
  for (size_t id = 0; id < bpe.tokens.size(); ++id) {
    absl::StrAppend(&out, id == 0 ? "\n" : ",\n", JsonQuote(byte_level::Encode(bpe.tokens[id])),
                    ":", id);
  }
  out += "},\n\"merges\":[";
  for (size_t i = 0; i < bpe.merges.size(); ++i) {
    const std::string merge = absl::StrCat(byte_level::Encode(bpe.tokens[bpe.merges[i].first]), " ",
                                           byte_level::Encode(bpe.tokens[bpe.merges[i].second]));
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", JsonQuote(merge));
  }
  out += "]}\n";
  return out;
}

}  // namespace

absl::StatusOr<std::string> BuildTinyTokenizerJson(int vocab_size) {
  if (vocab_size < 258 || vocab_size > 262144) {
    return absl::InvalidArgumentError(
        absl::StrCat("tiny tokenizer vocab_size ", vocab_size, " is outside [258, 262144]"));
  }
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<SplitRegex> split, SplitRegex::Compile(kLlama3Pattern));
  const std::string_view corpus = TinyTokenizerCorpus();
  std::vector<std::pair<size_t, size_t>> matches;
  PKV_RETURN_IF_ERROR(split->FindAll(corpus, &matches));
  std::vector<std::string> words;
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) words.emplace_back(corpus.substr(last, begin - last));
    words.emplace_back(corpus.substr(begin, end - begin));
    last = end;
  }
  if (last < corpus.size()) words.emplace_back(corpus.substr(last));

  const BpeTrainingResult bpe = TrainByteLevelBpe(words, vocab_size - 2, kMinPairCount);
  const int num_learned = static_cast<int>(bpe.tokens.size());
  const int bos_id = vocab_size - 2;
  std::string added = "\"added_tokens\":[";
  for (int id = num_learned; id < bos_id; ++id) {
    absl::StrAppend(
        &added, "\n",
        AddedTokenJson(id, absl::StrCat("<|reserved_special_token_", id - num_learned, "|>")), ",");
  }
  absl::StrAppend(&added, "\n", AddedTokenJson(bos_id, kBos), ",\n",
                  AddedTokenJson(vocab_size - 1, kEos), "],\n");

  std::string pipeline = PipelineJson();
  const size_t at = pipeline.find("BOS_ID");
  pipeline.replace(at, 6, std::to_string(bos_id));
  return absl::StrCat("{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\n", added,
                      pipeline, ModelJson(bpe), "}\n");
}

}  // namespace pkv
