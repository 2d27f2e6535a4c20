#include "worker/tokenizer/bpe_model.h"

#include <algorithm>
#include <cctype>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/tokenizer/byte_level.h"

namespace pkv {
namespace {

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Fields of a BPE model that change its output and that this implementation does not support:
// they must be absent, null, false or empty.
absl::Status CheckUnsupportedFields(const JsonValue& model) {
  if (const JsonValue* d = model.Find("dropout");
      d != nullptr && !d->is_null() && !(d->is_number() && d->number() == 0)) {
    return absl::InvalidArgumentError("model.dropout is not supported (must be null)");
  }
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const JsonValue* v = model.Find(name);
    if (v != nullptr && !v->is_null() && !(v->is_string() && v->str().empty())) {
      return absl::InvalidArgumentError(absl::StrCat("model.", name, " is not supported"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const JsonValue& model,
                                                             bool byte_level) {
  if (!model.is_object()) return absl::InvalidArgumentError("'model' must be an object");
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(model, "type", "BPE", "model"));
  if (type != "BPE") {
    return absl::InvalidArgumentError(
        absl::StrCat("model type '", type, "' is not supported (supported: BPE)"));
  }
  PKV_RETURN_IF_ERROR(CheckUnsupportedFields(model));
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->byte_level_ = byte_level;
  PKV_ASSIGN_OR_RETURN(m->ignore_merges_, JsonGetBoolOr(model, "ignore_merges", false, "model"));
  PKV_ASSIGN_OR_RETURN(m->byte_fallback_, JsonGetBoolOr(model, "byte_fallback", false, "model"));
  PKV_ASSIGN_OR_RETURN(m->fuse_unk_, JsonGetBoolOr(model, "fuse_unk", false, "model"));
  if (byte_level && m->byte_fallback_) {
    return absl::InvalidArgumentError(
        "model.byte_fallback=true needs a SentencePiece-style pipeline (no ByteLevel "
        "pre-tokenizer); byte-level BPE never falls back");
  }
  const JsonValue* vocab = model.Find("vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return absl::InvalidArgumentError("model.vocab must be an object of token -> id");
  }
  PKV_RETURN_IF_ERROR(m->LoadVocab(*vocab));
  PKV_RETURN_IF_ERROR(m->LoadSpecialIds(model));
  const JsonValue* merges = model.Find("merges");
  if (merges == nullptr || !merges->is_array()) {
    return absl::InvalidArgumentError("model.merges must be an array");
  }
  PKV_RETURN_IF_ERROR(m->LoadMerges(*merges));
  return m;
}

absl::Status BpeModel::LoadVocab(const JsonValue& vocab) {
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.members()) {
    if (!id.is_integer() || id.integer() < 0 || id.integer() > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.vocab['", token, "']: id must be an integer in [0, ", kMaxTokenId, "]"));
    }
    max_id = std::max(max_id, id.integer());
  }
  id_to_bytes_.assign(max_id + 1, std::string());
  std::vector<bool> seen(max_id + 1, false);
  vocab_.reserve(vocab.members().size());
  std::string bytes;
  for (const auto& [token, id_value] : vocab.members()) {
    const auto id = static_cast<int32_t>(id_value.integer());
    if (seen[id]) return absl::InvalidArgumentError(absl::StrCat("model.vocab: id ", id, " twice"));
    seen[id] = true;
    if (!TokenKey(token, &bytes)) {
      // Not spelled in the byte-level alphabet: BPE can never produce it, but ids still decode to
      // its text (as Hugging Face's ByteLevel decoder does for such tokens).
      id_to_bytes_[id] = token;
      continue;
    }
    if (!vocab_.emplace(bytes, id).second) {
      return absl::InvalidArgumentError(absl::StrCat("model.vocab: token '", token, "' twice"));
    }
    id_to_bytes_[id] = bytes;
  }
  return absl::OkStatus();
}

bool BpeModel::TokenKey(std::string_view token, std::string* key) const {
  if (byte_level_) return byte_level::Decode(token, key);
  key->assign(token.data(), token.size());
  return true;
}

absl::Status BpeModel::LoadSpecialIds(const JsonValue& model) {
  if (!byte_level_) {
    for (int c = 0; c < 128; ++c) {
      ascii_ids_[c] = TokenId(std::string(1, static_cast<char>(c))).value_or(-1);
    }
    for (int b = 0; b < 256; ++b) {
      // Hugging Face spells byte-fallback tokens format!("<{:#04X}>", b): "<0x0A>".
      const std::string name = absl::StrCat("<0x", absl::Hex(b, absl::kZeroPad2), ">");
      std::string upper = name;
      for (size_t i = 3; i < 5; ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
      byte_ids_[b] = TokenId(upper).value_or(-1);
    }
    PKV_ASSIGN_OR_RETURN(std::string unk, JsonGetStringOr(model, "unk_token", "", "model"));
    if (!unk.empty()) {
      const std::optional<int32_t> id = TokenId(unk);
      if (!id) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.unk_token '", unk, "' is not in the vocab"));
      }
      unk_id_ = *id;
    }
    return absl::OkStatus();
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(std::string(1, static_cast<char>(b)));
    if (it == vocab_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab lacks the byte-level token for byte 0x",
                       absl::Hex(b, absl::kZeroPad2), " (byte-level BPE needs all 256)"));
    }
    byte_ids_[b] = it->second;
  }
  return absl::OkStatus();
}

absl::Status BpeModel::LoadMerges(const JsonValue& merges) {
  merges_.reserve(merges.items().size());
  const auto& items = merges.items();
  for (size_t rank = 0; rank < items.size(); ++rank) {
    const JsonValue& m = items[rank];
    if (m.is_string()) {
      // Legacy "left right" form; byte-level tokens never contain a space (it is spelled 'Ġ').
      const std::string& s = m.str();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.merges[", rank, "] '", s, "' must be two tokens separated by one space"));
      }
      PKV_RETURN_IF_ERROR(AddMerge(rank, std::string_view(s).substr(0, space),
                                   std::string_view(s).substr(space + 1)));
    } else if (m.is_array() && m.items().size() == 2 && m.items()[0].is_string() &&
               m.items()[1].is_string()) {
      PKV_RETURN_IF_ERROR(AddMerge(rank, m.items()[0].str(), m.items()[1].str()));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.merges[", rank, "] must be a \"left right\" string or a [left, right] pair"));
    }
  }
  return absl::OkStatus();
}

absl::Status BpeModel::AddMerge(size_t rank, std::string_view left, std::string_view right) {
  if (rank > static_cast<size_t>(kMaxTokenId)) {
    return absl::InvalidArgumentError("model.merges: too many merges");
  }
  std::string left_bytes, right_bytes;
  auto lookup = [&](std::string_view token, std::string* bytes) -> std::optional<int32_t> {
    if (!byte_level_) return TokenId(token);  // no copy: Gemma 3 has 514k merges
    if (!TokenKey(token, bytes)) return std::nullopt;
    return TokenId(*bytes);
  };
  const std::optional<int32_t> l = lookup(left, &left_bytes);
  const std::optional<int32_t> r = lookup(right, &right_bytes);
  const auto where = [&] {
    return absl::StrCat("model.merges[", rank, "] ('", AbslView(left), "', '", AbslView(right),
                        "'): ");
  };
  if (!l)
    return absl::InvalidArgumentError(
        absl::StrCat(where(), "'", AbslView(left), "' is not in the vocab"));
  if (!r)
    return absl::InvalidArgumentError(
        absl::StrCat(where(), "'", AbslView(right), "' is not in the vocab"));
  std::string& joined = left_bytes;  // the merged token's key, built in place
  joined.assign(id_to_bytes_[*l]);
  joined += id_to_bytes_[*r];
  const std::optional<int32_t> merged = TokenId(joined);
  if (!merged) {
    return absl::InvalidArgumentError(absl::StrCat(where(), "the merged token '", AbslView(left),
                                                   AbslView(right), "' is not in the vocab"));
  }
  // A repeated pair keeps its last rank, as Hugging Face's and transformers.js's maps do.
  merges_[PairKey(*l, *r)] = Merge{static_cast<int32_t>(rank), *merged};
  return absl::OkStatus();
}

std::optional<int32_t> BpeModel::TokenId(std::string_view bytes) const {
  auto it = vocab_.find(AbslView(bytes));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (byte_level_ && word.size() == 1) {
    ids->push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (std::optional<int32_t> id = TokenId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(AbslView(word));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  MergeWord(word, ids);
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (cache_.size() < kCacheCapacity) {
      cache_.emplace(std::string(word), std::vector<int32_t>(ids->begin() + first, ids->end()));
    }
  }
}

void BpeModel::ByteSymbols(std::string_view word, std::vector<int32_t>* symbols) const {
  symbols->reserve(word.size());
  for (char c : word) symbols->push_back(byte_ids_[static_cast<uint8_t>(c)]);
}

void BpeModel::CharSymbols(std::string_view word, std::vector<int32_t>* symbols) const {
  symbols->reserve(word.size());
  int32_t pending_unk = -1;  // a fused unk not yet emitted (Hugging Face's `unk`)
  for (size_t pos = 0; pos < word.size();) {
    const auto lead = static_cast<uint8_t>(word[pos]);
    const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    const std::optional<int32_t> id =
        len == 1 && ascii_ids_[lead] >= 0 ? std::optional<int32_t>(ascii_ids_[lead]) : TokenId(ch);
    if (id) {
      if (pending_unk >= 0) symbols->push_back(pending_unk);
      pending_unk = -1;
      symbols->push_back(*id);
      continue;
    }
    if (byte_fallback_ && std::all_of(ch.begin(), ch.end(), [&](char b) {
          return byte_ids_[static_cast<uint8_t>(b)] >= 0;
        })) {
      // As in Hugging Face, a pending unk stays pending across byte-fallback tokens.
      for (char b : ch) symbols->push_back(byte_ids_[static_cast<uint8_t>(b)]);
      continue;
    }
    if (unk_id_ < 0) continue;  // no unk_token: the character is dropped
    if (pending_unk >= 0 && !fuse_unk_) symbols->push_back(pending_unk);
    pending_unk = unk_id_;
  }
  if (pending_unk >= 0) symbols->push_back(pending_unk);
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  // Symbols form a doubly linked list over positions 0..n-1; a merged-away symbol gets id -1.
  struct Symbol {
    int32_t id;
    int32_t prev;  // -1 at the start
    int32_t next;  // -1 at the end
  };
  // A candidate merge of the pair starting at `pos`; stale once that pair changed, which the
  // rank comparison detects (a rank names exactly one pair).
  struct Candidate {
    int32_t rank;
    int32_t pos;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<int32_t> initial;
  if (byte_level_) {
    ByteSymbols(word, &initial);
  } else {
    CharSymbols(word, &initial);
  }
  const auto n = static_cast<int32_t>(initial.size());
  if (n == 0) return;
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = Symbol{initial[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, pos});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (left.id < 0 || left.next < 0) continue;
    auto it = merges_.find(PairKey(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.rank != c.rank) continue;  // stale candidate
    Symbol& right = symbols[left.next];
    left.id = it->second.new_id;
    left.next = right.next;
    right.id = -1;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace pkv
