// Language features of the chat-template interpreter, with expected outputs worked out from
// jinja2's documented semantics (trim_blocks and lstrip_blocks on, as transformers sets them).
#include "chat_template/template.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/chat_template/test_util.h"

namespace pkv::chat {
namespace {

using testing::R;
using testing::RenderText;

TEST(ChatTemplateTest, TextAndExpressions) {
  EXPECT_EQ(R("Hello {{ name }}!", R"({"name": "world"})"), "Hello world!");
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 10 }} {{ 'a' ~ 1 ~ 'b' }}"),
            "7 9 1024 a1b");
  EXPECT_EQ(R("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 4 / 2 }}"),
            "3.5 3 -4 1 2 2.0");
  EXPECT_EQ(R("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 1 < 2 < 3 }} {{ not true }}"),
            "ababab [1, 2] True False");
  EXPECT_EQ(R("{# a comment #}{{ 'x' if false else 'y' }}{{ 'z' if false }}"), "y");
  EXPECT_EQ(R("{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }}"), "True False True");
}

TEST(ChatTemplateTest, PythonStrOfValues) {
  EXPECT_EQ(R("{{ true }} {{ none }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }}"),
            "True None 1.0 0.30000000000000004 1e+20 1.5e-07");
  EXPECT_EQ(R(R"({{ ['a', "it's", 1, none, true, {'k': [1.5]}] }})"),
            R"(['a', "it's", 1, None, True, {'k': [1.5]}])");
  EXPECT_EQ(R("{{ ('a',) }} {{ (1, 2) }} {{ {'a': 'x\ny'} }}"), "('a',) (1, 2) {'a': 'x\\ny'}");
  EXPECT_EQ(R("[{{ missing }}]"), "[]");
}

TEST(ChatTemplateTest, WhitespaceControlAsTransformers) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(R("{% if true %}\n    yes\n{% endif %}\nend"), "    yes\nend");
  EXPECT_EQ(R("a\n    {% if true %}\nb\n    {% endif %}\nc"), "a\nb\nc");
  EXPECT_EQ(R("a  {{- ' b ' -}}  c"), "a b c");
  EXPECT_EQ(R("a\n\n{%- if true -%}\n\n  b  \n{%- endif %}"), "ab");
  EXPECT_EQ(R("a {%+ if true %}b{% endif +%}\nc"), "a b\nc");
  EXPECT_EQ(R("{{ 'x' }}\n"), "x");      // one trailing newline is dropped
  EXPECT_EQ(R("{{ 'x' }}\n\n"), "x\n");  // only one
  EXPECT_EQ(R("line1\r\nline2"), "line1\nline2");
  EXPECT_EQ(R("  {# c #}\nx"), "x");
}

TEST(ChatTemplateTest, IfElifElse) {
  const char* src = "{% if n > 2 %}big{% elif n == 2 %}two{% else %}small{% endif %}";
  EXPECT_EQ(R(src, R"({"n": 3})"), "big");
  EXPECT_EQ(R(src, R"({"n": 2})"), "two");
  EXPECT_EQ(R(src, R"({"n": 1})"), "small");
}

TEST(ChatTemplateTest, ForLoopVariables) {
  EXPECT_EQ(R("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
              "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.previtem | default('-') }}"
              "{{ loop.nextitem | default('-') }}{{ loop.cycle('a', 'b') }} {% endfor %}"),
            "-2a 13b 2-a ");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}"),
            "15 35 55 75 95 ");
  EXPECT_EQ(
      R("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"),
      "b=1;a=2;");
  EXPECT_EQ(R("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "ba");
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
              "{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(R("{% for x in [3, 1, 2] | sort %}{{ x }}{% endfor %}"), "123");
  EXPECT_EQ(R("{% for m in messages[::-1] %}{{ m }}{% endfor %}", R"({"messages": [1, 2, 3]})"),
            "321");
}

TEST(ChatTemplateTest, SetScopingAndNamespace) {
  // A set inside a loop does not leak out; a namespace attribute does.
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(R("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
              "{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(R("{% if true %}{% set y = 'in' %}{% endif %}{{ y }}"), "in");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(R("{% set block %}  captured {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[  captured 2]");
  EXPECT_EQ(R("{% set x = 1 %}{% set x.y = 2 %}").substr(0, 6), "ERROR:");
}

TEST(ChatTemplateTest, Macros) {
  EXPECT_EQ(R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(punct='.', name='Cy') }}"),
            "Hi Ann! Hi Bob? Hi Cy.");
  EXPECT_EQ(
      R("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
      "321");
  EXPECT_EQ(R("{% macro f(a) %}[{{ a }}]{% endmacro %}{{ f() }}"), "[]");
}

TEST(ChatTemplateTest, AccessAndUndefined) {
  const char* ctx = R"({"m": {"role": "user", "items": 5, "list": [1, 2, 3]}, "s": "héllo"})";
  EXPECT_EQ(
      R("{{ m.role }} {{ m['role'] }} {{ m.list[-1] }} {{ m.list[1:] }} {{ m.list[::-1] }}", ctx),
      "user user 3 [2, 3] [3, 2, 1]");
  EXPECT_EQ(R("{{ s[1] }} {{ s[::-1] }} {{ s | length }} {{ s[10] is defined }}", ctx),
            "é olléh 5 False");
  // jinja2: `.items` is the dict method; ['items'] is the key.
  EXPECT_EQ(R("{{ m['items'] }} {{ m.missing is defined }} {{ m.missing | default('d') }}", ctx),
            "5 False d");
  EXPECT_EQ(R("{{ missing is defined }} {{ missing is undefined }} {{ missing | length }}"),
            "False True 0");
  // An attribute of an undefined value is an error, as in jinja2.
  EXPECT_EQ(R("{{ missing.attr }}").substr(0, 6), "ERROR:");
  EXPECT_EQ(R("{{ 'a' + missing }}").substr(0, 6), "ERROR:");
}

TEST(ChatTemplateTest, Tests) {
  EXPECT_EQ(R("{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ 1.0 is float }}"
              "{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}"
              "{{ none is none }}{{ true is boolean }}{{ false is false }}"),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(R("{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 2 is eq 2 }}"
              "{{ 'a' is equalto 'b' }}{{ x is not defined }}"),
            "TrueFalseTrueTrueFalseTrue");
}

TEST(ChatTemplateTest, StringMethods) {
  EXPECT_EQ(R("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\n\na'.lstrip('\n') }}|"
              "{{ 'a  '.rstrip() }}|"),
            "a b|a|a|a|");
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
  EXPECT_EQ(R("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'aXa'.upper() }}"
              "{{ 'AbC'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}"),
            "TrueTrueAXAabcHello WorldHello");
  EXPECT_EQ(R("{{ 'aaa'.replace('a', 'b', 2) }} {{ 'héllo'.find('l') }} {{ 'banana'.count('an') }}"
              " {{ '-'.join(['a', 'b']) }}"),
            "bba 2 2 a-b");
  EXPECT_EQ(R("{{ '<think>x</think>\n\ny'.split('</think>')[-1].lstrip('\n') }}"), "y");
}

TEST(ChatTemplateTest, DictAndBuiltins) {
  EXPECT_EQ(R("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys() | list }} "
              "{{ d.values() | list }}",
              R"({"d": {"a": 1, "b": 2}})"),
            "1 None 0 ['a', 'b'] [1, 2]");
  EXPECT_EQ(R("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  EXPECT_EQ(R("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}"), "{'a': 1, 'b': 'x'} 1");
}

TEST(ChatTemplateTest, GenerationBlockRendersItsBody) {
  // transformers' AssistantTracker tag: outside return_assistant_tokens_mask it only renders.
  auto out = RenderText("a{% generation %}b{{ 1 }}{% endgeneration %}c");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "ab1c");
}

TEST(ChatTemplateTest, StrftimeNowUsesInjectedTime) {
  setenv("TZ", "UTC", 1);
  RenderOptions options;
  options.now = absl::FromUnixSeconds(1721995200);  // 2024-07-26 12:00:00 UTC
  auto out = RenderText("{{ strftime_now('%d %b %Y %H:%M') }}", "{}", options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "26 Jul 2024 12:00");
}

TEST(ChatTemplateTest, SyntaxErrorsNameLineAndColumn) {
  auto bad = ChatTemplate::Compile("line one\n{% if x %}\n  {{ x + }}\n{% endif %}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().substr(0, 30), "chat template: line 3 col 10: ");
  auto unclosed = ChatTemplate::Compile("{% for x in y %}\nbody");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("endfor"), std::string::npos);
  auto unsupported = ChatTemplate::Compile("\n{% include 'x' %}");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.status().message().find("line 2 col 4"), std::string::npos);
  EXPECT_FALSE(ChatTemplate::Compile("{{ 'unterminated }}").ok());
  EXPECT_FALSE(ChatTemplate::Compile("{% endif %}").ok());
  EXPECT_FALSE(ChatTemplate::Compile("{{ x").ok());
}

TEST(ChatTemplateTest, RaiseExceptionCarriesMessageVerbatim) {
  auto out = RenderText("ok {{ raise_exception('Roles must alternate: ' ~ n) }}", R"({"n": 3})");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "Roles must alternate: 3");
}

TEST(ChatTemplateTest, RuntimeErrorsNameTheLine) {
  auto out = RenderText("a\nb\n{{ 'x' + 1 }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message().substr(0, 22), "chat template: line 3:");
  EXPECT_FALSE(RenderText("{{ [].append(1) }}").ok());  // the sandbox refuses mutation
  EXPECT_FALSE(RenderText("{{ 1 // 0 }}").ok());
  EXPECT_FALSE(RenderText("{{ nothing() }}").ok());
  EXPECT_FALSE(RenderText("{% for x in 5 %}{% endfor %}").ok());
}

TEST(ChatTemplateTest, RendersConcurrently) {
  auto tmpl = ChatTemplate::Compile(
      "{% for m in messages %}{{ m.role }}:{{ m.content | trim }};{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string json =
          R"({"messages": [{"role": "user", "content": " )" + std::to_string(t) + R"( "}]})";
      for (int i = 0; i < 200; ++i) results[t] = *tmpl->Render(*ParseJson(json));
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(results[t], "user:" + std::to_string(t) + ";");
}

}  // namespace
}  // namespace pkv::chat
