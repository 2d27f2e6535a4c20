// Filters, tojson as transformers defines it (json.dumps with ensure_ascii=False), and the
// Python-compatible text handling the filters rely on.
#include "chat_template/filters.h"

#include "gtest/gtest.h"
#include "tests/unit/chat_template/test_util.h"

namespace pkv::chat {
namespace {

using testing::R;

TEST(ChatTemplateFiltersTest, ToJsonMatchesPythonJsonDumps) {
  const char* ctx =
      R"({"v": {"b": [1, 2.5, true, null], "a": "é\"\\\n\t\u0001/", "e": {}, "l": [], "f": 1.0}})";
  EXPECT_EQ(R("{{ v | tojson }}", ctx),
            R"({"b": [1, 2.5, true, null], "a": "é\"\\\n\t\u0001/", "e": {}, "l": [], "f": 1.0})");
  EXPECT_EQ(R("{{ v.b | tojson(indent=2) }}", ctx), "[\n  1,\n  2.5,\n  true,\n  null\n]");
  EXPECT_EQ(
      R("{{ {'x': {'y': [1]}, 'z': {}} | tojson(indent=4) }}"),
      "{\n    \"x\": {\n        \"y\": [\n            1\n        ]\n    },\n    \"z\": {}\n}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
  EXPECT_EQ(R("{{ [1, 2] | tojson(separators=(',', ':')) }}"), "[1,2]");
  EXPECT_EQ(R("{{ '日本😀' | tojson }}"), "\"日本😀\"");
  EXPECT_EQ(R("{{ '日本' | tojson(true) }}"), "\"\\u65e5\\u672c\"");  // ensure_ascii positional
  EXPECT_EQ(R("{{ ('a', 1) | tojson }}"), "[\"a\", 1]");
  EXPECT_EQ(R("{{ missing | tojson }}").substr(0, 6), "ERROR:");
}

TEST(ChatTemplateFiltersTest, TextFilters) {
  EXPECT_EQ(R("[{{ '  a b \n' | trim }}][{{ 'xxaxx' | trim('x') }}][{{ '\u3000a\u00a0' | trim }}]"),
            "[a b][a][a]");
  EXPECT_EQ(R("{{ 'hello world-wide (x' | title }} {{ 'hELLO' | capitalize }} {{ 'a' | upper }}"),
            "Hello World-Wide (X Hello A");
  EXPECT_EQ(R("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 1) }}"), "a+b+c baa");
  EXPECT_EQ(R("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, first=true) }}|"
              "{{ 'a\n\nb' | indent('> ', blank=true) }}"),
            "a\n  b\n\n  c|  a\n  b|a\n> \n> b");
  EXPECT_EQ(R("[{{ 'ab' | center(6) }}] {{ 'two words, 三' | wordcount }} {{ '<a&\">' | e }}"),
            "[  ab  ] 3 &lt;a&amp;&#34;&gt;");
  EXPECT_EQ(R("{{ 5 | string }}{{ none | string }} {{ x | default('d') }} {{ '' | default('d') }}"
              " {{ '' | default('d', true) }} {{ x | d('e') }}"),
            "5None d  d e");
}

TEST(ChatTemplateFiltersTest, NumberFilters) {
  EXPECT_EQ(R("{{ '42' | int + 1 }} {{ 3.9 | int }} {{ 'x' | int }} {{ 'x' | int(7) }} "
              "{{ '2.5' | float }} {{ 2 | float }}"),
            "43 3 0 7 2.5 2.0");
  EXPECT_EQ(
      R("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.1 | round(0, 'ceil') }}"
        " {{ -3 | abs }} {{ -2.5 | abs }}"),
      "2.0 4.0 2.57 3.0 3 2.5");
}

TEST(ChatTemplateFiltersTest, SequenceFilters) {
  const char* ctx =
      R"({"ms": [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
                              {"role": "user", "content": "u2"}, {"role": "assistant"}]})";
  EXPECT_EQ(
      R("{{ ms | length }} {{ ms | count }} {{ 'héllo' | length }} {{ {'a': 1} | length }}", ctx),
      "4 4 5 1");
  EXPECT_EQ(R("{{ (ms | first).role }} {{ (ms | last).role }} {{ [] | first is defined }}", ctx),
            "system assistant False");
  EXPECT_EQ(R("{{ ms | map(attribute='role') | join(', ') }}", ctx),
            "system, user, user, assistant");
  EXPECT_EQ(
      R("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", ctx),
      "['u1', 'u2']");
  EXPECT_EQ(R("{{ ms | rejectattr('content') | map(attribute='role') | list }}", ctx),
            "['assistant']");
  EXPECT_EQ(R("{{ ms | map(attribute='content', default='-') | join }}", ctx), "su1u2-");
  EXPECT_EQ(R("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [0, 1, '', 'a'] | reject | list }}"),
            "[1, 3] [0, '']");
  EXPECT_EQ(R("{{ ['B', 'a', 'b', 'A'] | unique | list }} {{ ['b', 'A', 'c'] | sort | list }}"
              " {{ [3, 1] | sort(reverse=true) }} {{ ['a', 'b'] | map('upper') | list }}"),
            "['B', 'a'] ['A', 'b', 'c'] [3, 1] ['A', 'B']");
  EXPECT_EQ(R("{{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 3] | sum }} "
              "{{ 'abc' | reverse }} {{ [1, 2] | reverse | list }} {{ {'a': 1} | items | list }}"),
            "1 3 6 cba [2, 1] [('a', 1)]");
  EXPECT_EQ(R("{{ ms | map(attribute='role') | unique | list | length }}", ctx), "3");
}

TEST(ChatTemplateFiltersTest, UnknownFilterIsAnError) {
  EXPECT_EQ(R("{{ 'a' | no_such_filter }}").substr(0, 6), "ERROR:");
  EXPECT_EQ(R("{{ 'a' is no_such_test }}").substr(0, 6), "ERROR:");
}

}  // namespace
}  // namespace pkv::chat
