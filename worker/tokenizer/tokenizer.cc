#include "worker/tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv {
namespace {

constexpr size_t kMaxInputBytes = size_t{1} << 30;
constexpr size_t kMaxFileBytes = size_t{1} << 30;

constexpr char kSpiece[] = "\u2581";  // "▁"

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "'"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is too large"));
  }
  std::string text(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(text.data(), size)) {
    return absl::DataLossError(absl::StrCat("cannot read ", what, " '", path, "'"));
  }
  return text;
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json,
                                                               const TokenizerConfig* config) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", root.status().message()));
  }
  if (!root->is_object()) return absl::InvalidArgumentError("tokenizer.json: not a JSON object");
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  absl::Status st = t->Init(*root, config);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", st.message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path,
                                                               const std::string& config_path) {
  std::optional<TokenizerConfig> config;
  if (!config_path.empty()) {
    PKV_ASSIGN_OR_RETURN(std::string config_text, ReadFile(config_path, "tokenizer config"));
    absl::StatusOr<TokenizerConfig> parsed = ParseTokenizerConfig(config_text);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat(config_path, ": ", parsed.status().message()));
    }
    config = *std::move(parsed);
  }
  PKV_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "tokenizer file"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = FromJson(text, config ? &*config : nullptr);
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromModelDir(const std::string& dir) {
  const std::string json = dir + "/tokenizer.json";
  if (!FileExists(json) && FileExists(dir + "/tokenizer.model")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", dir,
        "' has tokenizer.model (SentencePiece) but no tokenizer.json, which PersistentKV "
        "needs; write it once with transformers: AutoTokenizer.from_pretrained(DIR)"
        ".save_pretrained(DIR)"));
  }
  const std::string config = dir + "/tokenizer_config.json";
  return FromFile(json, FileExists(config) ? config : "");
}

absl::Status Tokenizer::Init(const JsonValue& root, const TokenizerConfig* config) {
  const JsonValue* model = root.Find("model");
  if (model == nullptr) return absl::InvalidArgumentError("'model' is missing");
  PKV_ASSIGN_OR_RETURN(pre_tokenizer_, PreTokenizer::FromJson(root.Find("pre_tokenizer")));
  const bool byte_level = pre_tokenizer_.byte_level();
  PKV_ASSIGN_OR_RETURN(model_, BpeModel::FromJson(*model, byte_level));
  PKV_ASSIGN_OR_RETURN(normalizer_, Normalizer::FromJson(root.Find("normalizer")));
  PKV_ASSIGN_OR_RETURN(post_processor_, ParsePostProcessor(root.Find("post_processor")));
  PKV_ASSIGN_OR_RETURN(decoder_, Decoder::FromJson(root.Find("decoder"), byte_level));
  PKV_ASSIGN_OR_RETURN(added_tokens_, ParseAddedTokens(root.Find("added_tokens")));
  for (const AddedToken& t : added_tokens_) {
    if (!utf8::IsValid(t.content)) {
      return absl::InvalidArgumentError(absl::StrCat("added token ", t.id, " is not valid UTF-8"));
    }
  }
  PKV_RETURN_IF_ERROR(BuildIdTable());
  if (config != nullptr) PKV_RETURN_IF_ERROR(ApplyConfig(*config));
  // normalized=true tokens are matched against normalized text, so match their normalized form.
  std::vector<std::string> normalized_contents(added_tokens_.size());
  for (size_t i = 0; i < added_tokens_.size(); ++i) {
    if (added_tokens_[i].normalized) {
      PKV_RETURN_IF_ERROR(normalizer_.Apply(added_tokens_[i].content, &normalized_contents[i]));
    }
  }
  raw_matcher_ = std::make_unique<AddedTokenMatcher>(added_tokens_, normalized_contents, false);
  normalized_matcher_ =
      std::make_unique<AddedTokenMatcher>(added_tokens_, normalized_contents, true);
  return absl::OkStatus();
}

absl::Status Tokenizer::ApplyConfig(const TokenizerConfig& config) {
  eos_name_ = config.eos_token;
  if (config.RebuildsTemplate() || config.add_bos_token || config.add_eos_token) {
    const bool add_bos = config.add_bos_token.value_or(config.RebuildsTemplate());
    const bool add_eos = config.add_eos_token.value_or(false);
    auto id_of = [&](const std::optional<std::string>& name,
                     const char* field) -> absl::StatusOr<int32_t> {
      std::optional<int32_t> id = name ? TokenToId(*name) : std::nullopt;
      if (!id) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer_config.json: add_", field,
                                                       " is true but ", field, " is not a token"));
      }
      return *id;
    };
    post_processor_ = PostProcessor();
    if (add_bos) {
      PKV_ASSIGN_OR_RETURN(int32_t bos, id_of(config.bos_token, "bos_token"));
      post_processor_.prefix.push_back(bos);
    }
    if (add_eos) {
      PKV_ASSIGN_OR_RETURN(int32_t eos, id_of(config.eos_token, "eos_token"));
      post_processor_.suffix.push_back(eos);
    }
  }
  if (config.tokenizer_class == "LlamaTokenizer" && config.legacy == false) {
    if (model_->byte_level()) {
      return absl::InvalidArgumentError(
          "tokenizer_config.json: legacy=false needs a SentencePiece-style model");
    }
    non_legacy_ = true;
    normalizer_ = Normalizer();
    pre_tokenizer_ = PreTokenizer::Metaspace(kSpiece, "first", /*split=*/false);
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::BuildIdTable() {
  int32_t size = model_->num_ids();
  for (const AddedToken& t : added_tokens_) size = std::max(size, t.id + 1);
  id_bytes_.assign(size, std::string());
  is_special_.assign(size, false);
  const bool byte_level = model_->byte_level();
  for (int32_t id = 0; id < model_->num_ids(); ++id) {
    id_bytes_[id] =
        byte_level ? model_->TokenBytes(id) : decoder_.PieceBytes(model_->TokenBytes(id));
  }
  for (const AddedToken& t : added_tokens_) {
    // Hugging Face runs added tokens through the decoder too ("▁" in Gemma's whitespace tokens).
    id_bytes_[t.id] = byte_level ? t.content : decoder_.PieceBytes(t.content);
    is_special_[t.id] = t.special;
  }
  for (int32_t id : post_processor_.prefix) {
    if (id >= size)
      return absl::InvalidArgumentError(
          absl::StrCat("post_processor id ", id, " is not in the vocab"));
  }
  for (int32_t id : post_processor_.suffix) {
    if (id >= size)
      return absl::InvalidArgumentError(
          absl::StrCat("post_processor id ", id, " is not in the vocab"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       bool add_special_tokens) const {
  if (text.size() > kMaxInputBytes) {
    return absl::InvalidArgumentError(absl::StrCat("text is too long (", text.size(), " bytes)"));
  }
  if (!utf8::IsValid(text)) return absl::InvalidArgumentError("text is not valid UTF-8");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids = post_processor_.prefix;
  if (non_legacy_ && !text.empty()) {
    // transformers.js' LlamaTokenizer._encode_text for legacy=false.
    std::string spaced = kSpiece;
    for (size_t pos = 0; pos < text.size();) {
      const size_t next = text.find(kSpiece, pos);
      spaced.append(text.substr(pos, next == std::string_view::npos ? next : next - pos));
      if (next == std::string_view::npos) break;
      spaced.push_back(' ');
      pos = next + std::string_view(kSpiece).size();
    }
    const size_t first = ids.size();
    PKV_RETURN_IF_ERROR(EncodeText(spaced, &ids));
    const std::optional<int32_t> lone = model_->TokenId(kSpiece);
    if (ids.size() > first + 1 && lone && ids[first] == *lone && IsSpecial(ids[first + 1])) {
      ids.erase(ids.begin() + first);
    }
  } else {
    PKV_RETURN_IF_ERROR(EncodeText(text, &ids));
  }
  if (add_special_tokens) {
    ids.insert(ids.end(), post_processor_.suffix.begin(), post_processor_.suffix.end());
  }
  return ids;
}

absl::Status Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  std::vector<AddedTokenMatcher::Segment> segments;
  raw_matcher_->Split(text, &segments);
  for (const auto& seg : segments) {
    if (seg.token >= 0) {
      ids->push_back(added_tokens_[seg.token].id);
    } else {
      PKV_RETURN_IF_ERROR(EncodeSection(seg.text, seg.text.data() == text.data(), ids));
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodeSection(std::string_view raw, bool first,
                                      std::vector<int32_t>* ids) const {
  std::string normalized;
  PKV_RETURN_IF_ERROR(normalizer_.Apply(raw, &normalized));
  if (normalized_matcher_->empty()) return EncodePlain(normalized, first, ids);
  std::vector<AddedTokenMatcher::Segment> segments;
  normalized_matcher_->Split(normalized, &segments);
  for (const auto& seg : segments) {
    if (seg.token >= 0) {
      ids->push_back(added_tokens_[seg.token].id);
    } else {
      PKV_RETURN_IF_ERROR(
          EncodePlain(seg.text, first && seg.text.data() == normalized.data(), ids));
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodePlain(std::string_view normalized, bool first,
                                    std::vector<int32_t>* ids) const {
  std::vector<std::string> words;
  PKV_RETURN_IF_ERROR(pre_tokenizer_.Split(normalized, first, &words));
  for (const std::string& w : words) model_->EncodeWord(w, ids);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
    }
    if (skip_special_tokens && is_special_[id]) continue;
    out += id_bytes_[id];
  }
  int strip = decoder_.strip_count();
  decoder_.StripStart(&out, &strip);
  return out;
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return id_bytes_[id];
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& t : added_tokens_) {
    if (t.content == token) return t.id;
  }
  return model_->TokenId(token);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size() && is_special_[id];
}

std::optional<int32_t> Tokenizer::FirstSpecial(
    std::initializer_list<std::string_view> names) const {
  for (std::string_view name : names) {
    for (const AddedToken& t : added_tokens_) {
      if (t.special && t.content == name) return t.id;
    }
  }
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::bos_id() const {
  if (!post_processor_.prefix.empty()) return post_processor_.prefix.front();
  return FirstSpecial({"<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>"});
}

std::optional<int32_t> Tokenizer::eos_id() const {
  if (eos_name_) {
    if (std::optional<int32_t> id = TokenToId(*eos_name_)) return id;
  }
  return FirstSpecial({"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>"});
}

}  // namespace pkv
