// libFuzzer target: untrusted bytes as a chat template (model files carry them). The input is
// the template source; it is compiled and, when that succeeds, rendered with a small fixed
// conversation. Any status is fine; a crash, hang, sanitizer report or unbounded allocation is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat_template/template.h"
#include "common/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pkv::JsonValue* context = new pkv::JsonValue(*pkv::ParseJson(
      R"({"messages": [{"role": "system", "content": " sys "},
                       {"role": "user", "content": "hi 😀", "name": "u"},
                       {"role": "assistant", "content": "<think>t</think>a",
                        "tool_calls": [{"type": "function",
                                        "function": {"name": "f", "arguments": {"x": [1, 2.5]}}}]},
                       {"role": "tool", "content": "r"}],
          "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})"));
  auto tmpl =
      pkv::chat::ChatTemplate::Compile(std::string_view(reinterpret_cast<const char*>(data), size));
  if (tmpl.ok()) (void)tmpl->Render(*context);
  return 0;
}
