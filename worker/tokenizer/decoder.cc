#include "worker/tokenizer/decoder.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv {
namespace {

constexpr int kMaxSequenceDepth = 8;
constexpr int kMaxStrip = 64;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Hugging Face's ByteFallback test: exactly "<0x" two hex digits ">".
int FallbackByte(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = HexDigit(piece[3]);
  const int lo = HexDigit(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool IsOneChar(std::string_view s) {
  char32_t cp;
  return !s.empty() && utf8::DecodeChar(s, 0, &cp) == static_cast<int>(s.size());
}

}  // namespace

absl::StatusOr<Decoder> Decoder::FromJson(const JsonValue* config, bool byte_level) {
  Decoder d;
  const bool absent = config == nullptr || config->is_null();
  if (byte_level) {
    // A missing decoder is taken as ByteLevel, the only one that fits byte-level BPE.
    if (absent) return d;
    if (!config->is_object()) return absl::InvalidArgumentError("decoder: must be an object");
    PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(*config, "type", "", "decoder"));
    if (type != "ByteLevel") {
      return absl::InvalidArgumentError(absl::StrCat(
          "decoder type '", type, "' is not supported for byte-level BPE (supported: ByteLevel)"));
    }
    return d;
  }
  if (absent) {
    return absl::InvalidArgumentError(
        "decoder is missing: a SentencePiece-style model needs one (Replace, ByteFallback, Fuse, "
        "Strip or Metaspace)");
  }
  PKV_RETURN_IF_ERROR(d.AddFromJson(*config, 0));
  return d;
}

absl::Status Decoder::AddFromJson(const JsonValue& config, int depth) {
  if (!config.is_object()) return absl::InvalidArgumentError("decoder: must be an object");
  if (depth > kMaxSequenceDepth) return absl::InvalidArgumentError("decoder: nested too deep");
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(config, "type", "", "decoder"));
  if (type == "Sequence") {
    const JsonValue* list = config.Find("decoders");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("decoder Sequence: 'decoders' must be an array");
    }
    for (const JsonValue& item : list->items()) PKV_RETURN_IF_ERROR(AddFromJson(item, depth + 1));
    return absl::OkStatus();
  }
  if (type == "Fuse") {
    fused_ = true;
    return absl::OkStatus();
  }
  if (type == "Strip") return AddStrip(config);
  if (fused_) {
    return absl::InvalidArgumentError(
        absl::StrCat("decoder: '", type, "' after Fuse is not supported (only Strip is)"));
  }
  if (type == "ByteFallback") {
    steps_.push_back(Step{Kind::kByteFallback});
    return absl::OkStatus();
  }
  if (type == "Replace") {
    const JsonValue* pattern = config.Find("pattern");
    const JsonValue* literal = pattern != nullptr ? pattern->Find("String") : nullptr;
    if (literal == nullptr || !literal->is_string() || literal->str().empty()) {
      return absl::InvalidArgumentError(
          "decoder Replace: only a non-empty {\"String\": ..} pattern is supported");
    }
    Step step{Kind::kReplace, literal->str()};
    PKV_ASSIGN_OR_RETURN(step.to, JsonGetStringOr(config, "content", "", "decoder Replace"));
    steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "Metaspace") {
    PKV_ASSIGN_OR_RETURN(std::string replacement,
                         JsonGetStringOr(config, "replacement", "\u2581", "decoder Metaspace"));
    PKV_ASSIGN_OR_RETURN(bool add_prefix_space,
                         JsonGetBoolOr(config, "add_prefix_space", true, "decoder Metaspace"));
    PKV_ASSIGN_OR_RETURN(std::string scheme, JsonGetStringOr(config, "prepend_scheme",
                                                             add_prefix_space ? "always" : "never",
                                                             "decoder Metaspace"));
    if (!IsOneChar(replacement)) {
      return absl::InvalidArgumentError("decoder Metaspace: 'replacement' must be 1 character");
    }
    steps_.push_back(Step{Kind::kReplace, replacement, " "});
    // Hugging Face drops the first token's leading space; that token opens the sequence.
    if (scheme != "never" && strip_count_ == 0) {
      strip_char_ = " ";
      strip_count_ = 1;
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("decoder type '", type,
                   "' is not supported (supported: Sequence of Replace, ByteFallback, Fuse, Strip, "
                   "Metaspace)"));
}

absl::Status Decoder::AddStrip(const JsonValue& config) {
  PKV_ASSIGN_OR_RETURN(std::string content, JsonGetStringOr(config, "content", " ", "decoder"));
  PKV_ASSIGN_OR_RETURN(int64_t start, JsonGetIntOr(config, "start", 0, "decoder Strip"));
  PKV_ASSIGN_OR_RETURN(int64_t stop, JsonGetIntOr(config, "stop", 0, "decoder Strip"));
  if (!IsOneChar(content) || start < 0 || stop < 0 || start > kMaxStrip || stop > kMaxStrip) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decoder Strip: 'content' must be 1 character, start/stop in [0, ", kMaxStrip, "]"));
  }
  if (!fused_) {
    steps_.push_back(
        Step{Kind::kStrip, content, "", static_cast<int>(start), static_cast<int>(stop)});
    return absl::OkStatus();
  }
  // After Fuse the end of the sequence is only known when generation ends: not streamable.
  if (stop > 0) {
    return absl::InvalidArgumentError("decoder Strip after Fuse: stop > 0 is not supported");
  }
  strip_char_ = content;
  strip_count_ = static_cast<int>(start);
  return absl::OkStatus();
}

std::string Decoder::PieceBytes(std::string_view piece) const {
  std::string out(piece);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kReplace: {
        std::string next;
        size_t last = 0;
        for (size_t pos = out.find(step.from); pos != std::string::npos;
             pos = out.find(step.from, last)) {
          next.append(out, last, pos - last);
          next += step.to;
          last = pos + step.from.size();
        }
        next.append(out, last, std::string::npos);
        out = std::move(next);
        break;
      }
      case Kind::kByteFallback:
        if (const int b = FallbackByte(out); b >= 0) out.assign(1, static_cast<char>(b));
        break;
      case Kind::kStrip: {
        const size_t n = step.from.size();
        for (int i = 0; i < step.start && out.compare(0, n, step.from) == 0; ++i) out.erase(0, n);
        for (int i = 0;
             i < step.stop && out.size() >= n && out.compare(out.size() - n, n, step.from) == 0;
             ++i) {
          out.erase(out.size() - n);
        }
        break;
      }
    }
  }
  return out;
}

void Decoder::StripStart(std::string* text, int* remaining) const {
  if (*remaining <= 0) return;
  const size_t n = strip_char_.size();
  size_t cut = 0;
  while (*remaining > 0 && text->compare(cut, n, strip_char_) == 0) {
    cut += n;
    --*remaining;
  }
  if (cut < text->size()) *remaining = 0;  // another character came first
  text->erase(0, cut);
}

}  // namespace pkv
