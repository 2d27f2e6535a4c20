#include "worker/tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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
    steps_.push_back(Form::kNfc);
  } else if (type == "NFD") {
    steps_.push_back(Form::kNfd);
  } else if (type == "NFKC") {
    steps_.push_back(Form::kNfkc);
  } else if (type == "NFKD") {
    steps_.push_back(Form::kNfkd);
  } else if (type == "Sequence") {
    const JsonValue* list = config.Find("normalizers");
    if (list == nullptr || !list->is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: 'normalizers' must be an array");
    }
    for (const JsonValue& item : list->items()) PKV_RETURN_IF_ERROR(AddFromJson(item, depth + 1));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("normalizer type '", type,
                     "' is not supported (supported: null, NFC, NFD, NFKC, NFKD, Sequence)"));
  }
  return absl::OkStatus();
}

absl::Status Normalizer::Apply(std::string_view text, std::string* out) const {
  out->assign(text.data(), text.size());
  // ASCII is invariant under all four forms; most prompts are ASCII.
  if (steps_.empty() || IsAscii(text)) return absl::OkStatus();
  for (Form form : steps_) {
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* n = nullptr;
    switch (form) {
      case Form::kNfc:
        n = icu::Normalizer2::getNFCInstance(err);
        break;
      case Form::kNfd:
        n = icu::Normalizer2::getNFDInstance(err);
        break;
      case Form::kNfkc:
        n = icu::Normalizer2::getNFKCInstance(err);
        break;
      case Form::kNfkd:
        n = icu::Normalizer2::getNFKDInstance(err);
        break;
    }
    if (U_FAILURE(err) || n == nullptr) {
      return absl::InternalError(absl::StrCat("ICU normalizer unavailable: ", u_errorName(err)));
    }
    std::string result;
    result.reserve(out->size() + out->size() / 8);
    icu::StringByteSink<std::string> sink(&result);
    n->normalizeUTF8(0, icu::StringPiece(out->data(), static_cast<int32_t>(out->size())), sink,
                     nullptr, err);
    if (U_FAILURE(err)) {
      return absl::InternalError(absl::StrCat("ICU normalization failed: ", u_errorName(err)));
    }
    *out = std::move(result);
  }
  return absl::OkStatus();
}

}  // namespace pkv
