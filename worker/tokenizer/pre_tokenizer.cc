#include "worker/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pkv {
namespace {

constexpr int kMaxSequenceDepth = 8;

struct Segment {
  size_t begin;
  size_t end;
  bool delimiter;
};

// Cuts [0, size) at the matches into alternating segments (Hugging Face's find_matches): the
// delimiters are the matches, or with `invert` the text between them.
std::vector<Segment> Segments(size_t size, const std::vector<std::pair<size_t, size_t>>& matches,
                              bool invert) {
  std::vector<Segment> out;
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) out.push_back(Segment{last, begin, invert});
    out.push_back(Segment{begin, end, !invert});
    last = end;
  }
  if (last < size) out.push_back(Segment{last, size, invert});
  return out;
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const JsonValue* config) {
  PreTokenizer p;
  if (config == nullptr || config->is_null()) return p;
  PKV_RETURN_IF_ERROR(p.AddFromJson(*config, 0));
  return p;
}

PreTokenizer PreTokenizer::Metaspace(std::string_view replacement, std::string_view scheme,
                                     bool split) {
  Step step{Kind::kMetaspace};
  step.replacement = std::string(replacement);
  step.prepend = scheme == "first"   ? Prepend::kFirst
                 : scheme == "never" ? Prepend::kNever
                                     : Prepend::kAlways;
  if (split) step.regex = *SplitRegex::CompileLiteral(replacement);
  step.behavior = Behavior::kMergedWithNext;
  PreTokenizer p;
  p.steps_.push_back(std::move(step));
  return p;
}

absl::Status PreTokenizer::AddFromJson(const JsonValue& config, int depth) {
  if (!config.is_object()) return absl::InvalidArgumentError("pre_tokenizer: must be an object");
  if (depth > kMaxSequenceDepth)
    return absl::InvalidArgumentError("pre_tokenizer: nested too deep");
  if (byte_level()) {
    return absl::InvalidArgumentError("pre_tokenizer: nothing may follow the ByteLevel step");
  }
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(config, "type", "", "pre_tokenizer"));
  if (type == "Split") return AddSplit(config);
  if (type == "ByteLevel") return AddByteLevel(config);
  if (type == "Metaspace") return AddMetaspace(config);
  if (type == "Sequence") {
    const JsonValue* list = config.Find("pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: 'pretokenizers' must be an array");
    }
    for (const JsonValue& item : list->items()) PKV_RETURN_IF_ERROR(AddFromJson(item, depth + 1));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pre_tokenizer type '", type,
                   "' is not supported (supported: null, Split, ByteLevel, Metaspace, Sequence)"));
}

absl::Status PreTokenizer::AddSplit(const JsonValue& config) {
  Step step{Kind::kSplit};
  PKV_ASSIGN_OR_RETURN(step.invert, JsonGetBoolOr(config, "invert", false, "pre_tokenizer Split"));
  PKV_ASSIGN_OR_RETURN(std::string behavior,
                       JsonGetStringOr(config, "behavior", "", "pre_tokenizer Split"));
  if (behavior == "Isolated") {
    step.behavior = Behavior::kIsolated;
  } else if (behavior == "Removed") {
    step.behavior = Behavior::kRemoved;
  } else if (behavior == "MergedWithPrevious") {
    step.behavior = Behavior::kMergedWithPrevious;
  } else if (behavior == "MergedWithNext") {
    step.behavior = Behavior::kMergedWithNext;
  } else if (behavior == "Contiguous") {
    step.behavior = Behavior::kContiguous;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "pre_tokenizer Split: behavior '", behavior,
        "' is not supported (supported: Isolated, Removed, MergedWithPrevious, MergedWithNext, "
        "Contiguous)"));
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
  Step step{Kind::kByteLevel};
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

absl::Status PreTokenizer::AddMetaspace(const JsonValue& config) {
  constexpr char kCtx[] = "pre_tokenizer Metaspace";
  Step step{Kind::kMetaspace};
  PKV_ASSIGN_OR_RETURN(step.replacement, JsonGetStringOr(config, "replacement", "\u2581", kCtx));
  char32_t cp;
  if (step.replacement.empty() ||
      utf8::DecodeChar(step.replacement, 0, &cp) != static_cast<int>(step.replacement.size())) {
    return absl::InvalidArgumentError("pre_tokenizer Metaspace: 'replacement' must be 1 character");
  }
  // Files written before tokenizers 0.19 have add_prefix_space instead of prepend_scheme.
  PKV_ASSIGN_OR_RETURN(bool add_prefix_space,
                       JsonGetBoolOr(config, "add_prefix_space", true, kCtx));
  PKV_ASSIGN_OR_RETURN(
      std::string scheme,
      JsonGetStringOr(config, "prepend_scheme", add_prefix_space ? "always" : "never", kCtx));
  if (scheme == "always") {
    step.prepend = Prepend::kAlways;
  } else if (scheme == "first") {
    step.prepend = Prepend::kFirst;
  } else if (scheme == "never") {
    step.prepend = Prepend::kNever;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("pre_tokenizer Metaspace: prepend_scheme '",
                                                   scheme, "' (supported: always, first, never)"));
  }
  PKV_ASSIGN_OR_RETURN(bool split, JsonGetBoolOr(config, "split", true, kCtx));
  // Split on the replacement, each one staying with the word after it (MergedWithNext).
  if (split) {
    PKV_ASSIGN_OR_RETURN(step.regex, SplitRegex::CompileLiteral(step.replacement));
  }
  step.behavior = Behavior::kMergedWithNext;
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::ApplyStep(const Step& step, const Piece& in,
                                     std::vector<Piece>* out) const {
  if (in.text.empty()) return absl::OkStatus();
  std::string rewritten;
  std::string_view piece = in.text;
  if (step.kind == Kind::kByteLevel && step.add_prefix_space && piece.front() != ' ') {
    rewritten = absl::StrCat(" ", absl::string_view(piece.data(), piece.size()));
    piece = rewritten;
  } else if (step.kind == Kind::kMetaspace) {
    for (char c : piece) {
      if (c == ' ') {
        rewritten += step.replacement;
      } else {
        rewritten.push_back(c);
      }
    }
    const bool starts = rewritten.compare(0, step.replacement.size(), step.replacement) == 0;
    if (!starts &&
        (step.prepend == Prepend::kAlways || (step.prepend == Prepend::kFirst && in.at_start))) {
      rewritten.insert(0, step.replacement);
    }
    piece = rewritten;
  }
  if (step.regex == nullptr) {
    out->push_back(Piece{std::string(piece), in.at_start});
    return absl::OkStatus();
  }
  std::vector<std::pair<size_t, size_t>> matches;
  PKV_RETURN_IF_ERROR(step.regex->FindAll(piece, &matches));
  const std::vector<Segment> segments = Segments(piece.size(), matches, step.invert);
  // Hugging Face's SplitDelimiterBehavior, segment by segment.
  std::vector<Segment> words;
  bool previous_delimiter = false;
  switch (step.behavior) {
    case Behavior::kIsolated:
      words = segments;
      break;
    case Behavior::kRemoved:
      for (const Segment& s : segments) {
        if (!s.delimiter) words.push_back(s);
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.delimiter && !previous_delimiter && !words.empty()) {
          words.back().end = s.end;
        } else {
          words.push_back(s);
        }
        previous_delimiter = s.delimiter;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->delimiter && !previous_delimiter && !words.empty()) {
          words.back().begin = it->begin;
        } else {
          words.push_back(*it);
        }
        previous_delimiter = it->delimiter;
      }
      std::reverse(words.begin(), words.end());
      break;
    case Behavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.delimiter == previous_delimiter && !words.empty()) {
          words.back().end = s.end;
        } else {
          words.push_back(s);
        }
        previous_delimiter = s.delimiter;
      }
      break;
  }
  for (const Segment& w : words) {
    out->push_back(
        Piece{std::string(piece.substr(w.begin, w.end - w.begin)), in.at_start && w.begin == 0});
  }
  return absl::OkStatus();
}

absl::Status PreTokenizer::Split(std::string_view text, bool first_section,
                                 std::vector<std::string>* words) const {
  std::vector<Piece> pieces{Piece{std::string(text), first_section}};
  std::vector<Piece> next;
  for (const Step& step : steps_) {
    next.clear();
    for (const Piece& piece : pieces) PKV_RETURN_IF_ERROR(ApplyStep(step, piece, &next));
    pieces.swap(next);
  }
  for (Piece& p : pieces) {
    if (!p.text.empty()) words->push_back(std::move(p.text));
  }
  return absl::OkStatus();
}

}  // namespace pkv
