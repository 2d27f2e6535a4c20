#include "worker/tokenizer/pre_tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv {
namespace {

constexpr int kMaxSequenceDepth = 8;

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const JsonValue* config) {
  if (config == nullptr || config->is_null()) {
    return absl::InvalidArgumentError(
        "pre_tokenizer is missing: only byte-level BPE is supported, which needs a ByteLevel "
        "pre-tokenizer");
  }
  PreTokenizer p;
  PKV_RETURN_IF_ERROR(p.AddFromJson(*config, 0));
  if (p.steps_.empty() || p.steps_.back().kind != Kind::kByteLevel) {
    return absl::InvalidArgumentError(
        "pre_tokenizer: a ByteLevel step is required and must be the last one (only byte-level BPE "
        "is supported)");
  }
  return p;
}

absl::Status PreTokenizer::AddFromJson(const JsonValue& config, int depth) {
  if (!config.is_object()) return absl::InvalidArgumentError("pre_tokenizer: must be an object");
  if (depth > kMaxSequenceDepth)
    return absl::InvalidArgumentError("pre_tokenizer: nested too deep");
  if (!steps_.empty() && steps_.back().kind == Kind::kByteLevel) {
    return absl::InvalidArgumentError("pre_tokenizer: nothing may follow the ByteLevel step");
  }
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(config, "type", "", "pre_tokenizer"));
  if (type == "Split") return AddSplit(config);
  if (type == "ByteLevel") return AddByteLevel(config);
  if (type == "Sequence") {
    const JsonValue* list = config.Find("pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: 'pretokenizers' must be an array");
    }
    for (const JsonValue& item : list->items()) PKV_RETURN_IF_ERROR(AddFromJson(item, depth + 1));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "pre_tokenizer type '", type, "' is not supported (supported: Split, ByteLevel, Sequence)"));
}

absl::Status PreTokenizer::AddSplit(const JsonValue& config) {
  PKV_ASSIGN_OR_RETURN(bool invert, JsonGetBoolOr(config, "invert", false, "pre_tokenizer Split"));
  PKV_ASSIGN_OR_RETURN(std::string behavior,
                       JsonGetStringOr(config, "behavior", "", "pre_tokenizer Split"));
  // The "delimiters" are the matches, or with invert the text between them. Isolated keeps
  // delimiters as words of their own; Removed drops them (invert + Removed keeps only the matches,
  // the form tiktoken-converted tokenizers use).
  Step step;
  step.kind = Kind::kSplit;
  if (behavior == "Isolated") {
    step.keep_matches = step.keep_gaps = true;
  } else if (behavior == "Removed") {
    step.keep_matches = invert;
    step.keep_gaps = !invert;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("pre_tokenizer Split: behavior '", behavior,
                     "' is not supported (supported: Isolated, Removed)"));
  }
  const JsonValue* pattern = config.Find("pattern");
  const JsonValue* regex = pattern != nullptr ? pattern->Find("Regex") : nullptr;
  const JsonValue* literal = pattern != nullptr ? pattern->Find("String") : nullptr;
  if (regex != nullptr && regex->is_string()) {
    PKV_ASSIGN_OR_RETURN(step.regex, SplitRegex::Compile(regex->str()));
  } else if (literal != nullptr && literal->is_string()) {
    PKV_ASSIGN_OR_RETURN(step.regex, SplitRegex::CompileLiteral(literal->str()));
  } else {
    return absl::InvalidArgumentError(
        "pre_tokenizer Split: 'pattern' must be {\"Regex\": string} or {\"String\": string}");
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::AddByteLevel(const JsonValue& config) {
  Step step;
  step.kind = Kind::kByteLevel;
  PKV_ASSIGN_OR_RETURN(step.add_prefix_space,
                       JsonGetBoolOr(config, "add_prefix_space", false, "pre_tokenizer ByteLevel"));
  PKV_ASSIGN_OR_RETURN(bool use_regex,
                       JsonGetBoolOr(config, "use_regex", true, "pre_tokenizer ByteLevel"));
  if (use_regex) {
    PKV_ASSIGN_OR_RETURN(step.regex, SplitRegex::Compile(kGpt2SplitPattern));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::ApplyStep(const Step& step, std::string_view piece,
                                     std::vector<std::string>* out) const {
  if (piece.empty()) return absl::OkStatus();
  std::string prefixed;
  if (step.kind == Kind::kByteLevel && step.add_prefix_space && piece.front() != ' ') {
    prefixed = absl::StrCat(" ", absl::string_view(piece.data(), piece.size()));
    piece = prefixed;
  }
  if (step.regex == nullptr) {
    out->emplace_back(piece);
    return absl::OkStatus();
  }
  std::vector<std::pair<size_t, size_t>> matches;
  PKV_RETURN_IF_ERROR(step.regex->FindAll(piece, &matches));
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (step.keep_gaps && begin > last) out->emplace_back(piece.substr(last, begin - last));
    if (step.keep_matches) out->emplace_back(piece.substr(begin, end - begin));
    last = end;
  }
  if (step.keep_gaps && last < piece.size()) out->emplace_back(piece.substr(last));
  return absl::OkStatus();
}

absl::Status PreTokenizer::Split(std::string_view text, std::vector<std::string>* words) const {
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (const std::string& piece : pieces) PKV_RETURN_IF_ERROR(ApplyStep(step, piece, &next));
    pieces.swap(next);
  }
  for (std::string& p : pieces) {
    if (!p.empty()) words->push_back(std::move(p));
  }
  return absl::OkStatus();
}

}  // namespace pkv
