#include "worker/tokenizer/added_tokens.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "worker/tokenizer/bpe_model.h"

namespace pkv {
namespace {

// Offset where the character ending just before `pos` starts. REQUIRES: pos > 0, valid UTF-8.
size_t PrevCharStart(std::string_view text, size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

}  // namespace

bool IsUnicodeWhitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const JsonValue* list) {
  std::vector<AddedToken> tokens;
  if (list == nullptr || list->is_null()) return tokens;
  if (!list->is_array()) return absl::InvalidArgumentError("added_tokens must be an array");
  for (size_t i = 0; i < list->items().size(); ++i) {
    const JsonValue& item = list->items()[i];
    const std::string ctx = absl::StrCat("added_tokens[", i, "]");
    if (!item.is_object()) return absl::InvalidArgumentError(ctx + " must be an object");
    AddedToken t;
    PKV_ASSIGN_OR_RETURN(int64_t id, JsonGetInt(item, "id", ctx));
    if (id < 0 || id > kMaxTokenId) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx, ".id out of range [0, ", kMaxTokenId, "]"));
    }
    t.id = static_cast<int32_t>(id);
    PKV_ASSIGN_OR_RETURN(t.content, JsonGetStringOr(item, "content", "", ctx));
    if (t.content.empty()) return absl::InvalidArgumentError(ctx + ".content must be non-empty");
    PKV_ASSIGN_OR_RETURN(t.special, JsonGetBoolOr(item, "special", false, ctx));
    PKV_ASSIGN_OR_RETURN(t.lstrip, JsonGetBoolOr(item, "lstrip", false, ctx));
    PKV_ASSIGN_OR_RETURN(t.rstrip, JsonGetBoolOr(item, "rstrip", false, ctx));
    PKV_ASSIGN_OR_RETURN(t.normalized, JsonGetBoolOr(item, "normalized", !t.special, ctx));
    PKV_ASSIGN_OR_RETURN(bool single_word, JsonGetBoolOr(item, "single_word", false, ctx));
    if (single_word) {
      return absl::InvalidArgumentError(ctx + ".single_word=true is not supported");
    }
    tokens.push_back(std::move(t));
  }
  return tokens;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& contents, bool normalized) {
  nodes_.emplace_back();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].normalized != normalized) continue;
    const std::string& pattern = normalized ? contents[i] : tokens[i].content;
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (char c : pattern) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = edges_.emplace(key, static_cast<int32_t>(nodes_.size()));
      if (inserted) nodes_.emplace_back();
      node = it->second;
    }
    // With duplicate contents the first token wins.
    if (nodes_[node].token < 0) {
      nodes_[node] = Node{static_cast<int32_t>(i), tokens[i].lstrip, tokens[i].rstrip};
    }
    first_byte_[static_cast<uint8_t>(pattern[0])] = true;
    ++num_patterns_;
  }
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == edges_.end() ? -1 : it->second;
}

int32_t AddedTokenMatcher::LongestAt(std::string_view text, size_t pos, size_t* end) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t j = pos; j < text.size(); ++j) {
    node = Child(node, static_cast<uint8_t>(text[j]));
    if (node < 0) break;
    if (nodes_[node].token >= 0) {
      best = node;
      *end = j + 1;
    }
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<Segment>* out) const {
  size_t seg_start = 0;  // start of the pending plain segment
  size_t pos = 0;
  while (pos < text.size()) {
    size_t stop = 0;
    const int32_t node =
        first_byte_[static_cast<uint8_t>(text[pos])] ? LongestAt(text, pos, &stop) : -1;
    if (node < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    char32_t cp;
    if (nodes_[node].lstrip) {
      while (start > seg_start) {
        const size_t prev = PrevCharStart(text, start);
        if (utf8::DecodeChar(text, prev, &cp) == 0 || !IsUnicodeWhitespace(cp)) break;
        start = prev;
      }
    }
    if (nodes_[node].rstrip) {
      while (stop < text.size()) {
        const int len = utf8::DecodeChar(text, stop, &cp);
        if (len == 0 || !IsUnicodeWhitespace(cp)) break;
        stop += len;
      }
    }
    if (start > seg_start) out->push_back(Segment{text.substr(seg_start, start - seg_start), -1});
    out->push_back(Segment{text.substr(start, stop - start), nodes_[node].token});
    pos = seg_start = stop;
  }
  if (seg_start < text.size()) out->push_back(Segment{text.substr(seg_start), -1});
}

}  // namespace pkv
