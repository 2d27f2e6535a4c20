#include "worker/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace pkv {
namespace {

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string PcreErrorMessage(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return absl::StrCat("PCRE2 error ", code);
  return std::string(reinterpret_cast<const char*>(buffer), n);
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Length in bytes of the UTF-8 character whose lead byte is `b` (1 for anything unexpected).
size_t CharLength(unsigned char b) {
  if (b >= 0xF0) return 4;
  if (b >= 0xE0) return 3;
  if (b >= 0xC0) return 2;
  return 1;
}

}  // namespace

absl::StatusOr<std::string> TranslateOnigurumaPattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      continue;
    }
    const char e = pattern[++i];
    switch (e) {
      case 's':
        out += "\\p{White_Space}";
        break;
      case 'S':
        out += "\\P{White_Space}";
        break;
      case 'h':
      case 'H':
        return absl::InvalidArgumentError(absl::StrCat(
            "regex '", AbslView(pattern), "': \\", std::string(1, e),
            " is unsupported (it means a hex digit in Oniguruma but horizontal space in PCRE2)"));
      case 'u':
        if (i + 4 < pattern.size() && IsHex(pattern[i + 1]) && IsHex(pattern[i + 2]) &&
            IsHex(pattern[i + 3]) && IsHex(pattern[i + 4])) {
          absl::StrAppend(&out, "\\x{", AbslView(pattern.substr(i + 1, 4)), "}");
          i += 4;
          break;
        }
        return absl::InvalidArgumentError(
            absl::StrCat("regex '", AbslView(pattern), "': \\u must be followed by 4 hex digits"));
      default:
        out.push_back('\\');
        out.push_back(e);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SplitRegex>> SplitRegex::Compile(std::string_view pattern) {
  auto translated = TranslateOnigurumaPattern(pattern);
  if (!translated.ok()) return translated.status();
  return CompileImpl(pattern, *translated, /*literal=*/false);
}

absl::StatusOr<std::unique_ptr<SplitRegex>> SplitRegex::CompileLiteral(std::string_view literal) {
  if (literal.empty()) return absl::InvalidArgumentError("split pattern String must not be empty");
  return CompileImpl(literal, literal, /*literal=*/true);
}

absl::StatusOr<std::unique_ptr<SplitRegex>> SplitRegex::CompileImpl(std::string_view shown,
                                                                    std::string_view pcre_pattern,
                                                                    bool literal) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2_LITERAL admits UTF but not UCP (which only matters for classes anyway).
  const uint32_t options = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern.data()), pcre_pattern.size(), options,
                    &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("invalid regex '", AbslView(shown),
                                                   "': ", PcreErrorMessage(error_code),
                                                   " at offset ", error_offset));
  }
  // JIT is an optimisation only: when it is unavailable pcre2_match interprets the pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<SplitRegex>(new SplitRegex(std::string(shown), code));
}

SplitRegex::~SplitRegex() { pcre2_code_free(code_); }

absl::Status SplitRegex::FindAll(std::string_view text,
                                 std::vector<std::pair<size_t, size_t>>* matches) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
  if (md == nullptr) return absl::ResourceExhaustedError("regex: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  absl::Status status;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = absl::ResourceExhaustedError(absl::StrCat("regex '", pattern_, "' failed on a ",
                                                         text.size(),
                                                         "-byte input: ", PcreErrorMessage(rc)));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end > begin) {
      matches->emplace_back(begin, end);
      start = end;
    } else {
      if (begin >= text.size()) break;
      start = begin + CharLength(static_cast<unsigned char>(text[begin]));
    }
  }
  pcre2_match_data_free(md);
  return status;
}

}  // namespace pkv
