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

absl::Status CheckDecoder(const JsonValue* decoder) {
  // A missing decoder is taken as ByteLevel: the only model supported is byte-level BPE.
  if (decoder == nullptr || decoder->is_null()) return absl::OkStatus();
  if (!decoder->is_object()) return absl::InvalidArgumentError("decoder: must be an object");
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(*decoder, "type", "", "decoder"));
  if (type != "ByteLevel") {
    return absl::InvalidArgumentError(
        absl::StrCat("decoder type '", type, "' is not supported (supported: ByteLevel)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json) {
  absl::StatusOr<JsonValue> root = ParseJson(json);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", root.status().message()));
  }
  if (!root->is_object()) return absl::InvalidArgumentError("tokenizer.json: not a JSON object");
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  absl::Status st = t->Init(*root);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", st.message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open tokenizer file '", path, "'"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer file '", path, "' is too large"));
  }
  std::string text(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(text.data(), size)) {
    return absl::DataLossError(absl::StrCat("cannot read tokenizer file '", path, "'"));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = FromJson(text);
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

absl::Status Tokenizer::Init(const JsonValue& root) {
  const JsonValue* model = root.Find("model");
  if (model == nullptr) return absl::InvalidArgumentError("'model' is missing");
  PKV_ASSIGN_OR_RETURN(model_, BpeModel::FromJson(*model));
  PKV_ASSIGN_OR_RETURN(normalizer_, Normalizer::FromJson(root.Find("normalizer")));
  PKV_ASSIGN_OR_RETURN(pre_tokenizer_, PreTokenizer::FromJson(root.Find("pre_tokenizer")));
  PKV_ASSIGN_OR_RETURN(post_processor_, ParsePostProcessor(root.Find("post_processor")));
  PKV_RETURN_IF_ERROR(CheckDecoder(root.Find("decoder")));
  PKV_ASSIGN_OR_RETURN(added_tokens_, ParseAddedTokens(root.Find("added_tokens")));
  for (const AddedToken& t : added_tokens_) {
    if (!utf8::IsValid(t.content)) {
      return absl::InvalidArgumentError(absl::StrCat("added token ", t.id, " is not valid UTF-8"));
    }
  }
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
  return BuildIdTable();
}

absl::Status Tokenizer::BuildIdTable() {
  int32_t size = model_->num_ids();
  for (const AddedToken& t : added_tokens_) size = std::max(size, t.id + 1);
  id_bytes_.assign(size, std::string());
  is_special_.assign(size, false);
  for (int32_t id = 0; id < model_->num_ids(); ++id) id_bytes_[id] = model_->TokenBytes(id);
  for (const AddedToken& t : added_tokens_) {
    id_bytes_[t.id] = t.content;
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
  std::vector<AddedTokenMatcher::Segment> segments;
  raw_matcher_->Split(text, &segments);
  for (const auto& seg : segments) {
    if (seg.token >= 0) {
      ids.push_back(added_tokens_[seg.token].id);
    } else {
      PKV_RETURN_IF_ERROR(EncodeSection(seg.text, &ids));
    }
  }
  if (add_special_tokens) {
    ids.insert(ids.end(), post_processor_.suffix.begin(), post_processor_.suffix.end());
  }
  return ids;
}

absl::Status Tokenizer::EncodeSection(std::string_view raw, std::vector<int32_t>* ids) const {
  std::string normalized;
  PKV_RETURN_IF_ERROR(normalizer_.Apply(raw, &normalized));
  if (normalized_matcher_->empty()) return EncodePlain(normalized, ids);
  std::vector<AddedTokenMatcher::Segment> segments;
  normalized_matcher_->Split(normalized, &segments);
  for (const auto& seg : segments) {
    if (seg.token >= 0) {
      ids->push_back(added_tokens_[seg.token].id);
    } else {
      PKV_RETURN_IF_ERROR(EncodePlain(seg.text, ids));
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodePlain(std::string_view normalized, std::vector<int32_t>* ids) const {
  std::vector<std::string> words;
  PKV_RETURN_IF_ERROR(pre_tokenizer_.Split(normalized, &words));
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
  return FirstSpecial({"<|begin_of_text|>", "<s>", "<|startoftext|>"});
}

std::optional<int32_t> Tokenizer::eos_id() const {
  return FirstSpecial({"<|end_of_text|>", "<|endoftext|>", "</s>"});
}

}  // namespace pkv
