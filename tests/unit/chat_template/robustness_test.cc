// Hostile templates and inputs: deep nesting, huge loops, huge strings, runaway recursion and
// garbled sources end in an error status quickly, never a crash or a hang.
#include <random>
#include <string>

#include "chat_template/template.h"
#include "gtest/gtest.h"
#include "tests/unit/chat_template/test_util.h"

namespace pkv::chat {
namespace {

using testing::RenderText;

TEST(ChatTemplateRobustnessTest, DeepNestingIsRefused) {
  for (int depth : {100, 1000, 100000}) {
    std::string src = "{{ " + std::string(depth, '[') + std::string(depth, ']') + " }}";
    auto out = RenderText(src);
    if (depth >= 1000) {
      EXPECT_FALSE(out.ok()) << depth;
    }
    std::string parens = "{{ " + std::string(depth, '(') + "1" + std::string(depth, ')') + " }}";
    out = RenderText(parens);
    if (depth >= 1000) {
      EXPECT_FALSE(out.ok()) << depth;
    }
    std::string nots = "{{ " + [&] {
      std::string s;
      for (int i = 0; i < depth; ++i) s += "not ";
      return s;
    }() + "1 }}";
    out = RenderText(nots);
    if (depth >= 1000) {
      EXPECT_FALSE(out.ok()) << depth;
    }
    std::string ifs;
    for (int i = 0; i < depth; ++i) ifs += "{% if true %}";
    for (int i = 0; i < depth; ++i) ifs += "{% endif %}";
    out = RenderText(ifs);
    if (depth >= 1000) {
      EXPECT_FALSE(out.ok()) << depth;
    }
  }
  // Values nested by a loop instead of by the source.
  auto out = RenderText(
      "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}"
      "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | tojson }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

TEST(ChatTemplateRobustnessTest, HugeLoopsHitALimit) {
  auto out = RenderText("{% for i in range(10**9) %}x{% endfor %}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  out = RenderText(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
      "{% endfor %}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

TEST(ChatTemplateRobustnessTest, ExpensiveStepsHitTheTimeLimit) {
  // Few steps, each one costly: only the wall-clock backstop (10 s) ends this.
  auto out = RenderText(
      "{% set big = range(100000) | list %}{% for i in range(100000) %}"
      "{{ big | unique | length }}{% endfor %}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

TEST(ChatTemplateRobustnessTest, HugeOutputHitsALimit) {
  auto out = RenderText("{{ 'x' * 10**9 }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  out = RenderText("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  out = RenderText(
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  out = RenderText("{{ 2 ** 200 }}");
  EXPECT_FALSE(out.ok());  // int64 overflow is an error, never a wrong number
}

TEST(ChatTemplateRobustnessTest, RunawayRecursionHitsALimit) {
  auto out = RenderText("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

// Random mutations of a real-looking template: any status is fine, a crash is not.
TEST(ChatTemplateRobustnessTest, GarbledSourcesNeverCrash) {
  const std::string base =
      "{%- set ns = namespace(a=0) %}{% for m in messages[::-1] if m.role != 'x' %}"
      "{{- '<|' + m.role + '|>' ~ (m.content | trim) }}{% if loop.last %}{% set ns.a = 1 %}"
      "{% elif m.tool_calls %}{{ m.tool_calls | tojson(indent=2) }}{% endif %}{% endfor %}"
      "{% macro f(x, y=[1, {'k': 2}]) %}{{ x.split(',')[1:] }}{% endmacro %}{{ f('a,b') }}"
      "{# c #}{{ raise_exception('no') if ns.a > 5 else range(3) | list }}";
  const std::string alphabet = "{}%#-+()[]'\"|.,:=~*/ \n\\abcdefgifnotinxyz0123456789";
  const char* ctx = R"({"messages": [{"role": "user", "content": " hi "},
                      {"role": "assistant", "content": "a,b", "tool_calls": [{"x": 1}]}]})";
  std::mt19937 rng(12345);
  int ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string src = base;
    int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (src.size() + 1);
      switch (rng() % 3) {
        case 0:
          src.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:
          if (pos < src.size()) src.erase(pos, 1 + rng() % 4);
          break;
        default:
          if (pos < src.size()) src[pos] = alphabet[rng() % alphabet.size()];
      }
    }
    ok += RenderText(src, ctx).ok();
  }
  EXPECT_GT(ok, 0);  // some mutations still render
  // Arbitrary bytes.
  for (int iter = 0; iter < 2000; ++iter) {
    std::string src(rng() % 64, '\0');
    for (char& c : src) c = static_cast<char>(rng() % 256);
    (void)RenderText(src, ctx);
  }
}

TEST(ChatTemplateRobustnessTest, HostileContextValues) {
  std::string deep = std::string(100, '[') + std::string(100, ']');
  auto out = RenderText("{{ v | tojson }}{{ v }}{{ v | length }}", "{\"v\": " + deep + "}");
  EXPECT_TRUE(out.ok()) << out.status();
  auto tmpl = ChatTemplate::Compile("{{ x }}");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->Render(JsonValue::String("not an object")).ok());
}

}  // namespace
}  // namespace pkv::chat
