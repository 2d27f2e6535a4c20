#include "worker/tokenizer/text_stream.h"

#include <algorithm>
#include <utility>

#include "common/utf8.h"

namespace pkv {

TextStream::TextStream(const Tokenizer* tokenizer, std::vector<std::string> stop_strings,
                       bool skip_special_tokens, bool strip_sequence_start)
    : tokenizer_(tokenizer),
      stop_strings_(std::move(stop_strings)),
      skip_special_tokens_(skip_special_tokens),
      strip_remaining_(strip_sequence_start ? tokenizer->decoder().strip_count() : 0) {
  for (const std::string& s : stop_strings_) usable_.push_back(!s.empty() && utf8::IsValid(s));
}

TextStream::Delta TextStream::Push(int32_t token_id) {
  Delta delta;
  if (stopped() || finished_) {
    delta.stopped = stopped();
    return delta;
  }
  if (!(skip_special_tokens_ && tokenizer_->IsSpecial(token_id))) {
    partial_bytes_.append(tokenizer_->TokenBytes(token_id));
  }
  std::string decoded;
  const size_t consumed = utf8::DecodeLossy(partial_bytes_, /*final=*/false, &decoded);
  partial_bytes_.erase(0, consumed);
  tokenizer_->decoder().StripStart(&decoded, &strip_remaining_);
  delta.text = Advance(decoded, /*final=*/false);
  delta.stopped = stopped();
  return delta;
}

void TextStream::Prime(absl::Span<const int32_t> token_ids) {
  for (int32_t id : token_ids) Push(id);
}

std::string TextStream::Flush() {
  if (stopped() || finished_) return "";
  std::string decoded;
  utf8::DecodeLossy(partial_bytes_, /*final=*/true, &decoded);
  partial_bytes_.clear();
  tokenizer_->decoder().StripStart(&decoded, &strip_remaining_);
  std::string out = Advance(decoded, /*final=*/true);
  finished_ = true;
  return out;
}

std::string TextStream::Advance(const std::string& new_text, bool final) {
  pending_ += new_text;
  size_t match_begin = 0;
  int which = -1;
  if (FindStop(&match_begin, &which)) {
    stop_index_ = which;
    std::string out = pending_.substr(0, match_begin);
    pending_.clear();
    return out;
  }
  const size_t hold = final ? 0 : HoldBackLength();
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

bool TextStream::FindStop(size_t* match_begin, int* which) const {
  // pending_ holds no complete stop string from earlier calls (we would have stopped), so any
  // match found here ends in the new text; the earliest end is the one a char-by-char stream sees.
  size_t best_end = std::string::npos;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const std::string& s = stop_strings_[i];
    if (!usable_[i]) continue;
    const size_t pos = pending_.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < *match_begin)) {
      best_end = end;
      *match_begin = pos;
      *which = static_cast<int>(i);
    }
  }
  return best_end != std::string::npos;
}

size_t TextStream::HoldBackLength() const {
  size_t best = 0;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    if (!usable_[i]) continue;
    const std::string& s = stop_strings_[i];
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > best; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace pkv
