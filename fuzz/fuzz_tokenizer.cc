// libFuzzer target: untrusted bytes as "<tokenizer.json>\0<text>" -> Tokenizer::FromJson, and when
// that succeeds, Encode of the text (with and without special tokens) and Decode of the ids. Input
// without a NUL is all JSON, encoded against a fixed text. The seed corpus holds the tiny model's
// tokenizer.json, so mutations reach the BPE merges, the regex pre-tokenizer and normalization.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  const std::string_view text =
      nul == std::string_view::npos ? std::string_view("Hello, world! 123") : input.substr(nul + 1);
  auto tokenizer = pkv::Tokenizer::FromJson(json);
  if (!tokenizer.ok()) return 0;
  for (const bool special : {false, true}) {
    auto ids = (*tokenizer)->Encode(text, special);
    if (ids.ok()) (void)(*tokenizer)->Decode(*ids, /*skip_special_tokens=*/special);
  }
  return 0;
}
