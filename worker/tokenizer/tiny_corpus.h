// The built-in English corpus (prose, numbers, punctuation, a little code) that the tiny
// tokenizer's merges are learned from. A fixed string: part of what makes the tiny tokenizer
// deterministic.
#pragma once

#include <string_view>

namespace pkv {

std::string_view TinyTokenizerCorpus();

}  // namespace pkv
