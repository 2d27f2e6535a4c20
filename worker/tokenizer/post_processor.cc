#include "worker/tokenizer/post_processor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/tokenizer/bpe_model.h"

namespace pkv {
namespace {

constexpr int kMaxSequenceDepth = 8;

// Appends the ids of special token `name` from the template's "special_tokens" map.
absl::Status AppendSpecial(const JsonValue& config, const std::string& name,
                           std::vector<int32_t>* out) {
  const JsonValue* specials = config.Find("special_tokens");
  const JsonValue* entry = specials != nullptr ? specials->Find(name) : nullptr;
  const JsonValue* ids = entry != nullptr ? entry->Find("ids") : nullptr;
  if (ids == nullptr || !ids->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "post_processor TemplateProcessing: special token '", name, "' has no entry with 'ids'"));
  }
  for (const JsonValue& id : ids->items()) {
    if (!id.is_integer() || id.integer() < 0 || id.integer() > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat(
          "post_processor TemplateProcessing: special token '", name, "' has an invalid id"));
    }
    out->push_back(static_cast<int32_t>(id.integer()));
  }
  return absl::OkStatus();
}

absl::Status ParseTemplate(const JsonValue& config, PostProcessor* out) {
  const JsonValue* single = config.Find("single");
  if (single == nullptr || !single->is_array()) {
    return absl::InvalidArgumentError(
        "post_processor TemplateProcessing: 'single' must be an array");
  }
  int num_sequences = 0;
  for (const JsonValue& piece : single->items()) {
    const JsonValue* special = piece.Find("SpecialToken");
    const JsonValue* sequence = piece.Find("Sequence");
    if (special != nullptr) {
      PKV_ASSIGN_OR_RETURN(std::string name,
                           JsonGetStringOr(*special, "id", "", "post_processor SpecialToken"));
      PKV_RETURN_IF_ERROR(
          AppendSpecial(config, name, num_sequences == 0 ? &out->prefix : &out->suffix));
    } else if (sequence != nullptr) {
      PKV_ASSIGN_OR_RETURN(std::string id,
                           JsonGetStringOr(*sequence, "id", "", "post_processor Sequence"));
      if (id != "A") {
        return absl::InvalidArgumentError(absl::StrCat(
            "post_processor TemplateProcessing: 'single' refers to sequence '", id, "'"));
      }
      ++num_sequences;
    } else {
      return absl::InvalidArgumentError(
          "post_processor TemplateProcessing: 'single' items must be SpecialToken or Sequence");
    }
  }
  if (num_sequences != 1) {
    return absl::InvalidArgumentError(
        "post_processor TemplateProcessing: 'single' must contain exactly one $A");
  }
  return absl::OkStatus();
}

absl::Status AddFromJson(const JsonValue& config, int depth, PostProcessor* out) {
  if (!config.is_object()) return absl::InvalidArgumentError("post_processor: must be an object");
  if (depth > kMaxSequenceDepth)
    return absl::InvalidArgumentError("post_processor: nested too deep");
  PKV_ASSIGN_OR_RETURN(std::string type, JsonGetStringOr(config, "type", "", "post_processor"));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "TemplateProcessing") {
    if (!out->prefix.empty() || !out->suffix.empty()) {
      return absl::InvalidArgumentError("post_processor: more than one TemplateProcessing");
    }
    return ParseTemplate(config, out);
  }
  if (type == "Sequence") {
    const JsonValue* list = config.Find("processors");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("post_processor Sequence: 'processors' must be an array");
    }
    for (const JsonValue& item : list->items())
      PKV_RETURN_IF_ERROR(AddFromJson(item, depth + 1, out));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "post_processor type '", type,
      "' is not supported (supported: null, ByteLevel, TemplateProcessing, Sequence)"));
}

}  // namespace

absl::StatusOr<PostProcessor> ParsePostProcessor(const JsonValue* config) {
  PostProcessor p;
  if (config != nullptr && !config->is_null()) PKV_RETURN_IF_ERROR(AddFromJson(*config, 0, &p));
  return p;
}

}  // namespace pkv
