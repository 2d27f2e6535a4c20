// BPE tokenizer loaded from a Hugging Face tokenizer.json, in two flavours (bpe_model.h):
//   byte-level BPE (Llama 3, Qwen2/Qwen3, DeepSeek-V3, gpt-oss, byte-level Mistral), and
//   SentencePiece-style BPE (Llama 2, Mistral v0.1, Gemma, Yi): byte_fallback with "<0xNN>" tokens,
//   spaces turned into "▁" by a Replace/Prepend normalizer or a Metaspace pre-tokenizer.
// The flavour is byte-level exactly when the pre-tokenizer ends in ByteLevel. Encoding follows
// Hugging Face tokenizers:
//   1. added tokens (normalized=false) are cut out of the raw text, leftmost-longest;
//   2. each remaining section is normalized (normalizer.h; a Prepend normalizer therefore adds its
//      "▁" after every added token too: the "legacy" behaviour of Llama 2 files), then
//      normalized=true added tokens are cut out;
//   3. the pre-tokenizer splits it into words (pre_tokenizer.h; regexes run on PCRE2);
//   4. each word is BPE-merged (bpe_model.h);
//   5. with add_special_tokens, the post-processor's template ids go around the result.
// tokenizer_config.json (tokenizer_config.h), when given, can rebuild that template from
// add_bos_token / add_eos_token, and legacy=false switches a LlamaTokenizer to transformers.js's
// non-legacy encoding (no normalizer, Metaspace with prepend_scheme "first", "▁" in the text read
// as a space, and a lone leading "▁" before a special token dropped).
// Decoding concatenates each token's raw bytes (decoder.h: byte-level alphabet, or "▁" -> " " and
// "<0xNN>" -> byte NN), then drops the decoder's leading strip (Llama 2: one space).
//
// Models that ship only tokenizer.model (SentencePiece protobuf) are refused by FromModelDir with
// FAILED_PRECONDITION naming the missing tokenizer.json (convert it with transformers once).
//
// Anything in the file that would change the output and is not implemented is rejected with
// INVALID_ARGUMENT naming it, never ignored. FromJson takes untrusted bytes: every failure is a
// Status, and sizes are bounded (ids < 2^21).
//
// Ids: model vocabulary ids and added-token ids share one space [0, vocab_size()); an id that
// neither defines (a hole) decodes to nothing. When an added token reuses a model id, the added
// token's content wins.
//
// Thread-safety: immutable after construction (the BPE word cache is internally synchronized), so
// one Tokenizer may serve all requests concurrently. Keep it alive as long as any TextStream
// pointing at it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/tokenizer/added_tokens.h"
#include "worker/tokenizer/bpe_model.h"
#include "worker/tokenizer/decoder.h"
#include "worker/tokenizer/normalizer.h"
#include "worker/tokenizer/post_processor.h"
#include "worker/tokenizer/pre_tokenizer.h"
#include "worker/tokenizer/tokenizer_config.h"

namespace pkv {

class Tokenizer {
 public:
  // Parses the text of a tokenizer.json, with the model's tokenizer_config.json when not null.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(
      std::string_view json, const TokenizerConfig* config = nullptr);
  // Reads and parses a tokenizer.json file and, when `config_path` is not empty, a
  // tokenizer_config.json (NOT_FOUND / INVALID_ARGUMENT naming the path).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path,
                                                             const std::string& config_path = "");
  // A Hugging Face model folder: DIR/tokenizer.json plus DIR/tokenizer_config.json when present.
  // FAILED_PRECONDITION when the folder has tokenizer.model but no tokenizer.json.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromModelDir(const std::string& dir);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`. Added tokens in the text (special or not) always map to their ids; with
  // add_special_tokens the post-processor's ids (e.g. BOS) are added around them.
  // INVALID_ARGUMENT when `text` is not well-formed UTF-8 or larger than 1 GiB.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens = false) const;

  // Concatenated raw bytes of `ids` (not necessarily well-formed UTF-8: a character may be split
  // across tokens; see TextStream for incremental, UTF-8-safe decoding), less the decoder's leading
  // strip. With skip_special_tokens, special added tokens contribute nothing. INVALID_ARGUMENT for
  // an id outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens = false) const;

  // Raw bytes of token `id` (SentencePiece-style: "▁" already a space, "<0xNN>" the byte);
  // empty for ids outside [0, vocab_size()) and for holes.
  std::string_view TokenBytes(int32_t id) const;
  // The decoder: TextStream applies its leading strip at the start of a stream.
  const Decoder& decoder() const { return decoder_; }
  // False for SentencePiece-style BPE.
  bool byte_level() const { return model_->byte_level(); }

  // 1 + the largest id defined by the vocabulary or the added tokens. The model's embedding table
  // may be larger (padded); ids beyond this decode to nothing.
  int32_t vocab_size() const { return static_cast<int32_t>(id_bytes_.size()); }

  // The id whose token is exactly `token` (an added token's content, else a vocabulary token's raw
  // bytes), if any.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // True when `id` is an added token marked special.
  bool IsSpecial(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }

  // BOS: the first id the post-processor puts before a sequence, else the first special token
  // among <|begin_of_text|>, <s>, <|startoftext|>. EOS: the first special token among
  // <|end_of_text|>, <|endoftext|>, </s>. tokenizer.json does not record either: callers that have
  // the model's generation_config.json should prefer its bos/eos_token_id.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  Tokenizer() = default;
  absl::Status Init(const JsonValue& root, const TokenizerConfig* config);
  absl::Status ApplyConfig(const TokenizerConfig& config);
  absl::Status BuildIdTable();
  absl::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const;
  // Steps 2-4 for a piece of raw text between added tokens; `first`: it starts the input.
  absl::Status EncodeSection(std::string_view raw, bool first, std::vector<int32_t>* ids) const;
  absl::Status EncodePlain(std::string_view normalized, bool first,
                           std::vector<int32_t>* ids) const;
  std::optional<int32_t> FirstSpecial(std::initializer_list<std::string_view> names) const;

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  Decoder decoder_;
  PostProcessor post_processor_;
  bool non_legacy_ = false;              // LlamaTokenizer with legacy=false (see top)
  std::optional<std::string> eos_name_;  // tokenizer_config.json's eos_token
  std::vector<AddedToken> added_tokens_;
  std::unique_ptr<AddedTokenMatcher> raw_matcher_;         // normalized=false tokens
  std::unique_ptr<AddedTokenMatcher> normalized_matcher_;  // normalized=true tokens
  std::vector<std::string> id_bytes_;                      // [vocab_size] raw bytes per id
  std::vector<bool> is_special_;                           // [vocab_size]
};

}  // namespace pkv
