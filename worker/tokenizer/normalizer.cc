#include "worker/tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv {
namespace {

constexpr int kMaxSequenceDepth = 8;

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const JsonValue* config) {
  Normalizer n;
  if (config != nullptr && !config->is_null()) PKV_RETURN_IF_ERROR(n.AddFromJson(*config, 0));
  return n;
}

absl::Status Normalizer::AddFromJson(const JsonValue& config, int depth) {
  if (!config.is_object()) return absl::InvalidArgumentError("normalizer: must be an object");
  if (depth > kMaxSequenceDepth) return absl::InvalidArgumentError("normalizer: nested too deep");
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(config, "type", "", "normalizer"));
  if (type == "NFC") {
    steps_.push_back(Step{Kind::kNfc});
  } else if (type == "NFD") {
    steps_.push_back(Step{Kind::kNfd});
  } else if (type == "NFKC") {
    steps_.push_back(Step{Kind::kNfkc});
  } else if (type == "NFKD") {
    steps_.push_back(Step{Kind::kNfkd});
  } else if (type == "Replace") {
    return AddReplace(config);
  } else if (type == "Prepend") {
    Step step{Kind::kPrepend};
    PKV_ASSIGN_OR_RETURN(step.content,
                         JsonGetStringOr(config, "prepend", "", "normalizer Prepend"));
    if (!utf8::IsValid(step.content)) {
      return absl::InvalidArgumentError("normalizer Prepend: 'prepend' is not valid UTF-8");
    }
    steps_.push_back(std::move(step));
  } else if (type == "Sequence") {
    const JsonValue* list = config.Find("normalizers");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: 'normalizers' must be an array");
    }
    for (const JsonValue& item : list->items()) PKV_RETURN_IF_ERROR(AddFromJson(item, depth + 1));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "normalizer type '", type,
        "' is not supported (supported: null, NFC, NFD, NFKC, NFKD, Replace, Prepend, Sequence)"));
  }
  return absl::OkStatus();
}

absl::Status Normalizer::AddReplace(const JsonValue& config) {
  Step step{Kind::kReplace};
  PKV_ASSIGN_OR_RETURN(step.content, JsonGetStringOr(config, "content", "", "normalizer Replace"));
  const JsonValue* pattern = config.Find("pattern");
  const JsonValue* regex = pattern != nullptr ? pattern->Find("Regex") : nullptr;
  const JsonValue* literal = pattern != nullptr ? pattern->Find("String") : nullptr;
  if (literal != nullptr && literal->is_string() && !literal->str().empty()) {
    step.literal = literal->str();
  } else if (regex != nullptr && regex->is_string()) {
    PKV_ASSIGN_OR_RETURN(step.regex, SplitRegex::Compile(regex->str()));
  } else {
    return absl::InvalidArgumentError(
        "normalizer Replace: 'pattern' must be {\"String\": non-empty string} or {\"Regex\": "
        "string}");
  }
  if (!utf8::IsValid(step.content) || !utf8::IsValid(step.literal)) {
    return absl::InvalidArgumentError("normalizer Replace: pattern or content is not valid UTF-8");
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status Normalizer::Apply(std::string_view text, std::string* out) const {
  out->assign(text.data(), text.size());
  const bool ascii = IsAscii(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kReplace:
        PKV_RETURN_IF_ERROR(ApplyReplace(step, out));
        break;
      case Kind::kPrepend:
        // As Hugging Face's Prepend: empty text stays empty.
        if (!out->empty()) out->insert(0, step.content);
        break;
      default:
        // ASCII is invariant under all four Unicode forms; most prompts are ASCII.
        if (!ascii || !IsAscii(*out)) PKV_RETURN_IF_ERROR(ApplyUnicode(step.kind, out));
    }
  }
  return absl::OkStatus();
}

absl::Status Normalizer::ApplyReplace(const Step& step, std::string* text) {
  std::string result;
  if (step.regex == nullptr) {
    const std::string& from = step.literal;
    size_t last = 0;
    for (size_t pos = text->find(from); pos != std::string::npos; pos = text->find(from, last)) {
      result.append(*text, last, pos - last);
      result += step.content;
      last = pos + from.size();
    }
    if (last == 0) return absl::OkStatus();  // no match
    result.append(*text, last, std::string::npos);
  } else {
    std::vector<std::pair<size_t, size_t>> matches;
    PKV_RETURN_IF_ERROR(step.regex->FindAll(*text, &matches));
    if (matches.empty()) return absl::OkStatus();
    size_t last = 0;
    for (const auto& [begin, end] : matches) {
      result.append(*text, last, begin - last);
      result += step.content;
      last = end;
    }
    result.append(*text, last, std::string::npos);
  }
  *text = std::move(result);
  return absl::OkStatus();
}

absl::Status Normalizer::ApplyUnicode(Kind kind, std::string* text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (kind) {
    case Kind::kNfc:
      n = icu::Normalizer2::getNFCInstance(err);
      break;
    case Kind::kNfd:
      n = icu::Normalizer2::getNFDInstance(err);
      break;
    case Kind::kNfkc:
      n = icu::Normalizer2::getNFKCInstance(err);
      break;
    default:
      n = icu::Normalizer2::getNFKDInstance(err);
      break;
  }
  if (U_FAILURE(err) || n == nullptr) {
    return absl::InternalError(absl::StrCat("ICU normalizer unavailable: ", u_errorName(err)));
  }
  std::string result;
  result.reserve(text->size() + text->size() / 8);
  icu::StringByteSink<std::string> sink(&result);
  n->normalizeUTF8(0, icu::StringPiece(text->data(), static_cast<int32_t>(text->size())), sink,
                   nullptr, err);
  if (U_FAILURE(err)) {
    return absl::InternalError(absl::StrCat("ICU normalization failed: ", u_errorName(err)));
  }
  *text = std::move(result);
  return absl::OkStatus();
}

}  // namespace pkv
