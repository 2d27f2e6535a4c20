// Finding a model's chat template (chat_template.jinja, tokenizer_config.json string or named
// list) and the variables RenderChat passes.
#include <filesystem>
#include <fstream>

#include "chat_template/model_chat_template.h"
#include "gtest/gtest.h"

namespace pkv::chat {
namespace {

namespace fs = std::filesystem;

class ChatTemplateLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pkv_chat_loader_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(ChatTemplateLoaderTest, StringTemplateAndAddedTokens) {
  Write("tokenizer_config.json",
        R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
            "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>"})");
  auto model = LoadModelChatTemplate(dir_.string());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->has_value());
  EXPECT_EQ((*model)->bos_token, "<s>");
  EXPECT_EQ((*model)->eos_token, "</s>");
  auto tmpl = ChatTemplate::Compile((*model)->source);
  ASSERT_TRUE(tmpl.ok());
  auto out = RenderChat(*tmpl, **model, *ParseJson(R"([{"role": "user", "content": "hi"}])"), false,
                        JsonValue());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s>hi</s>");
}

TEST_F(ChatTemplateLoaderTest, NamedTemplateListUsesDefault) {
  Write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"},
                              {"name": "default", "template": "D"}]})");
  auto model = LoadModelChatTemplate(dir_.string());
  ASSERT_TRUE(model.ok() && model->has_value());
  EXPECT_EQ((*model)->source, "D");
  EXPECT_EQ((*model)->bos_token, "");
}

TEST_F(ChatTemplateLoaderTest, JinjaFileWins) {
  Write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "E"})");
  Write("chat_template.jinja", "file");
  auto model = LoadModelChatTemplate(dir_.string());
  ASSERT_TRUE(model.ok() && model->has_value());
  EXPECT_EQ((*model)->source, "file");
  EXPECT_EQ((*model)->eos_token, "E");
}

TEST_F(ChatTemplateLoaderTest, NoTemplate) {
  Write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  auto model = LoadModelChatTemplate(dir_.string());
  ASSERT_TRUE(model.ok());
  EXPECT_FALSE(model->has_value());
  auto empty = LoadModelChatTemplate((dir_ / "nowhere").string());
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

TEST_F(ChatTemplateLoaderTest, ErrorsNameTheFile) {
  Write("tokenizer_config.json", R"({"chat_template": 5})");
  auto model = LoadModelChatTemplate(dir_.string());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("tokenizer_config.json"), std::string::npos);
  Write("tokenizer_config.json", "{not json");
  model = LoadModelChatTemplate(dir_.string());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("tokenizer_config.json"), std::string::npos);
}

TEST_F(ChatTemplateLoaderTest, RenderChatPassesTransformersVariables) {
  auto tmpl = ChatTemplate::Compile(
      "{{ add_generation_prompt }} {{ tools is none }} {{ documents is none }} "
      "{{ enable_thinking }} {{ messages | length }} [{{ bos_token }}]");
  ASSERT_TRUE(tmpl.ok());
  ModelChatTemplate model;
  auto out = RenderChat(*tmpl, model, *ParseJson("[1, 2]"), true,
                        *ParseJson(R"({"enable_thinking": false})"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "True True True False 2 []");
  EXPECT_FALSE(RenderChat(*tmpl, model, *ParseJson("{}"), true, JsonValue()).ok());
  EXPECT_FALSE(RenderChat(*tmpl, model, *ParseJson("[]"), true, *ParseJson("[]")).ok());
}

}  // namespace
}  // namespace pkv::chat
