// The JSON reader (common/json.h) on its own: values, escapes, numbers, nesting bound, the errors
// and their byte offsets, and the typed accessors. (It is also fuzzed: fuzz/.)
#include "common/json.h"

#include <string>

#include "gtest/gtest.h"

namespace pkv {
namespace {

TEST(JsonTest, ParsesEveryKindOfValue) {
  auto v = ParseJson(R"( {"n": null, "t": true, "f": false, "i": -42, "d": 2.5e3,
                          "s": "x", "a": [1, [2], {}], "o": {"k": "v"}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_object());
  EXPECT_TRUE(v->Find("n")->is_null());
  EXPECT_TRUE(v->Find("t")->bool_value());
  EXPECT_FALSE(v->Find("f")->bool_value());
  EXPECT_TRUE(v->Find("i")->is_integer());
  EXPECT_EQ(v->Find("i")->integer(), -42);
  EXPECT_TRUE(v->Find("d")->is_number());
  EXPECT_FALSE(v->Find("d")->is_integer());
  EXPECT_DOUBLE_EQ(v->Find("d")->number(), 2500.0);
  EXPECT_EQ(v->Find("s")->str(), "x");
  ASSERT_EQ(v->Find("a")->items().size(), 3u);
  EXPECT_TRUE(v->Find("a")->items()[2].is_object());
  EXPECT_EQ(v->Find("o")->Find("k")->str(), "v");
  EXPECT_EQ(v->Find("missing"), nullptr);
  EXPECT_EQ(v->Find("s")->Find("k"), nullptr) << "Find on a non-object";
}

TEST(JsonTest, MembersKeepFileOrderAndFindReturnsTheFirstDuplicate) {
  auto v = ParseJson(R"({"b": 1, "a": 2, "b": 3})");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->members().size(), 3u);
  EXPECT_EQ(v->members()[0].first, "b");
  EXPECT_EQ(v->members()[1].first, "a");
  EXPECT_EQ(v->Find("b")->integer(), 1);
}

TEST(JsonTest, DecodesEscapesAndSurrogatePairs) {
  auto v = ParseJson(R"(["\"\\\/\b\f\n\r\t", "\u00e9\u4e2d", "\ud83d\ude00"])");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->items()[0].str(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(v->items()[1].str(), "\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(v->items()[2].str(), "\xF0\x9F\x98\x80");
}

TEST(JsonTest, LargeIntegersStayExactOrBecomeDoubles) {
  auto v = ParseJson("[9007199254740993, 92233720368547758070, -0, 1e2]");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->items()[0].is_integer());
  EXPECT_EQ(v->items()[0].integer(), 9007199254740993);  // beyond double's exact range
  EXPECT_FALSE(v->items()[1].is_integer()) << "does not fit int64";
  EXPECT_TRUE(v->items()[1].is_number());
  EXPECT_FALSE(v->items()[3].is_integer()) << "an exponent makes it a double";
}

TEST(JsonTest, RejectsMalformedInputNamingTheOffset) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "\"\\ud800\"", "tru",
                          "[1] 2", "{\"a\":1,}", "\"unterminated", "\"ctrl\x01\""}) {
    auto v = ParseJson(bad);
    EXPECT_FALSE(v.ok()) << "accepted: " << bad;
    if (!v.ok()) {
      EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
  auto v = ParseJson("[1, 2, ?]");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("7"), std::string::npos) << v.status();
}

TEST(JsonTest, NestingIsBounded) {
  const std::string ok = std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto v = ParseJson(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JsonTest, TypedAccessorsNameTheContextAndField) {
  auto v = ParseJson(R"({"layers": 32, "eps": 1e-5, "name": "m", "tied": true, "bad": "x"})");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*JsonGetInt(*v, "layers", "config.json"), 32);
  EXPECT_EQ(*JsonGetIntOr(*v, "heads", 8, "config.json"), 8);
  EXPECT_DOUBLE_EQ(*JsonGetNumberOr(*v, "eps", 0, "config.json"), 1e-5);
  EXPECT_EQ(*JsonGetStringOr(*v, "name", "", "config.json"), "m");
  EXPECT_TRUE(*JsonGetBoolOr(*v, "tied", false, "config.json"));
  auto missing = JsonGetInt(*v, "vocab", "config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("config.json"), std::string::npos);
  EXPECT_NE(missing.status().message().find("vocab"), std::string::npos);
  EXPECT_FALSE(JsonGetInt(*v, "bad", "config.json").ok()) << "wrong type";
  EXPECT_FALSE(JsonGetBoolOr(*v, "bad", false, "config.json").ok()) << "wrong type";
}

}  // namespace
}  // namespace pkv
