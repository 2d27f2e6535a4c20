#include "worker/model/model_config.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/test_seed.h"

namespace pkv {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;  // key -> raw JSON value

std::string ToJson(const Fields& fields) {
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&out, i ? ",\n" : "\n", "  \"", fields[i].first, "\": ", fields[i].second);
  }
  return out + "\n}";
}

Fields With(Fields f, const std::string& key, const std::string& value) {
  for (auto& kv : f) {
    if (kv.first == key) {
      kv.second = value;
      return f;
    }
  }
  f.emplace_back(key, value);
  return f;
}

Fields Without(Fields f, const std::string& key) {
  Fields out;
  for (auto& kv : f) {
    if (kv.first != key) out.push_back(kv);
  }
  return out;
}

// The published Llama-3.1-8B config.json, abridged to the fields that matter.
Fields Llama3Config() {
  return {{"architectures", R"(["LlamaForCausalLM"])"},
          {"model_type", R"("llama")"},
          {"attention_bias", "false"},
          {"bos_token_id", "128000"},
          {"eos_token_id", "128001"},
          {"hidden_act", R"("silu")"},
          {"hidden_size", "4096"},
          {"intermediate_size", "14336"},
          {"max_position_embeddings", "131072"},
          {"num_attention_heads", "32"},
          {"num_hidden_layers", "32"},
          {"num_key_value_heads", "8"},
          {"rms_norm_eps", "1e-05"},
          {"rope_scaling", R"({"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192, "rope_type": "llama3"})"},
          {"rope_theta", "500000.0"},
          {"tie_word_embeddings", "false"},
          {"torch_dtype", R"("bfloat16")"},
          {"vocab_size", "128256"}};
}

TEST(ModelConfigTest, Llama3) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(ToJson(Llama3Config()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->num_layers, 32);
  EXPECT_EQ(c->num_q_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->o_proj_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{128001});
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(ModelConfigTest, EosListAndRopeParametersObject) {
  Fields f = With(Llama3Config(), "eos_token_id", "[128001, 128008, 128009]");
  f = Without(Without(f, "rope_scaling"), "rope_theta");
  f.emplace_back("rope_parameters", R"({"rope_theta": 250000.0, "rope_type": "llama3",
      "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192})");
  absl::StatusOr<ModelConfig> c = ParseModelConfig(ToJson(f));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_FLOAT_EQ(c->rope_theta, 250000.0f);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
}

TEST(ModelConfigTest, Qwen2HasQkvBiasByDefault) {
  Fields f = {{"architectures", R"(["Qwen2ForCausalLM"])"},
              {"model_type", R"("qwen2")"},
              {"hidden_size", "896"},
              {"intermediate_size", "4864"},
              {"max_position_embeddings", "32768"},
              {"max_window_layers", "21"},
              {"num_attention_heads", "14"},
              {"num_hidden_layers", "24"},
              {"num_key_value_heads", "2"},
              {"rms_norm_eps", "1e-06"},
              {"rope_theta", "1000000.0"},
              {"sliding_window", "32768"},
              {"use_sliding_window", "false"},
              {"tie_word_embeddings", "true"},
              {"vocab_size", "151936"},
              {"eos_token_id", "151643"},
              {"bos_token_id", "151643"},
              {"rope_scaling", "null"}};
  absl::StatusOr<ModelConfig> c = ParseModelConfig(ToJson(f));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->o_proj_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->num_q_heads / c->num_kv_heads, 7);
  EXPECT_EQ(c->rope_scaling.type, "");
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->sliding_window, 0);
  // An explicit attention_bias is honoured.
  c = ParseModelConfig(ToJson(With(f, "attention_bias", "false")));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->attention_bias);
}

TEST(ModelConfigTest, Qwen3ExplicitHeadDimAndQkNorm) {
  Fields f = {{"architectures", R"(["Qwen3ForCausalLM"])"},
              {"model_type", R"("qwen3")"},
              {"attention_bias", "false"},
              {"head_dim", "128"},
              {"hidden_size", "1024"},
              {"intermediate_size", "3072"},
              {"max_position_embeddings", "40960"},
              {"num_attention_heads", "16"},
              {"num_hidden_layers", "28"},
              {"num_key_value_heads", "8"},
              {"rope_theta", "1000000"},
              {"sliding_window", "null"},
              {"tie_word_embeddings", "true"},
              {"vocab_size", "151936"},
              {"eos_token_id", "151645"}};
  absl::StatusOr<ModelConfig> c = ParseModelConfig(ToJson(f));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 128);  // not hidden / heads = 64
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);  // the HF default when absent
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
}

Fields MistralConfig() {
  return {{"architectures", R"(["MistralForCausalLM"])"},
          {"model_type", R"("mistral")"},
          {"hidden_size", "4096"},
          {"intermediate_size", "14336"},
          {"max_position_embeddings", "32768"},
          {"num_attention_heads", "32"},
          {"num_hidden_layers", "32"},
          {"num_key_value_heads", "8"},
          {"rms_norm_eps", "1e-05"},
          {"rope_theta", "1000000.0"},
          {"sliding_window", "null"},
          {"vocab_size", "32768"},
          {"bos_token_id", "1"},
          {"eos_token_id", "2"}};
}

TEST(ModelConfigTest, MistralNullWindowIsIgnored) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(ToJson(MistralConfig()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_FALSE(c->attention_bias);
}

TEST(ModelConfigTest, MistralNarrowWindowClampsContext) {
  absl::StatusOr<ModelConfig> c =
      ParseModelConfig(ToJson(With(MistralConfig(), "sliding_window", "4096")));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->max_position_embeddings, 4096);
  // A window at least as wide as the context changes nothing.
  c = ParseModelConfig(ToJson(With(MistralConfig(), "sliding_window", "32768")));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->max_position_embeddings, 32768);
}

struct BadCase {
  std::string label;
  std::string json;
  std::string field;  // must appear in the message
};

std::vector<BadCase> BadCases() {
  const Fields base = Llama3Config();
  std::vector<BadCase> cases;
  for (const char* required :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "max_position_embeddings", "model_type"}) {
    cases.push_back(
        {absl::StrCat("missing ", required), ToJson(Without(base, required)), required});
  }
  cases.push_back({"string size", ToJson(With(base, "hidden_size", R"("4096")")), "hidden_size"});
  cases.push_back({"float size", ToJson(With(base, "vocab_size", "12.5")), "vocab_size"});
  cases.push_back(
      {"negative size", ToJson(With(base, "intermediate_size", "-3")), "intermediate_size"});
  cases.push_back(
      {"zero layers", ToJson(With(base, "num_hidden_layers", "0")), "num_hidden_layers"});
  cases.push_back({"huge size", ToJson(With(base, "vocab_size", "4294967296")), "vocab_size"});
  cases.push_back({"heads not dividing", ToJson(With(base, "num_key_value_heads", "5")),
                   "num_attention_heads"});
  cases.push_back(
      {"hidden not dividing", ToJson(With(base, "num_attention_heads", "24")), "hidden_size"});
  cases.push_back({"odd head_dim", ToJson(With(base, "head_dim", "65")), "head_dim"});
  cases.push_back({"negative kv heads", ToJson(With(base, "num_key_value_heads", "-8")),
                   "num_key_value_heads"});
  cases.push_back({"bool eps", ToJson(With(base, "rms_norm_eps", "true")), "rms_norm_eps"});
  cases.push_back({"zero theta", ToJson(With(base, "rope_theta", "0")), "rope_theta"});
  cases.push_back({"bad model type", ToJson(With(base, "model_type", R"("gpt2")")), "model_type"});
  cases.push_back({"bad rope type",
                   ToJson(With(base, "rope_scaling", R"({"rope_type": "yarn", "factor": 4})")),
                   "rope_type"});
  cases.push_back({"rope without factor",
                   ToJson(With(base, "rope_scaling", R"({"rope_type": "llama3"})")), "factor"});
  cases.push_back(
      {"rope scaling not object", ToJson(With(base, "rope_scaling", "[1]")), "rope_scaling"});
  cases.push_back({"eos string", ToJson(With(base, "eos_token_id", R"("</s>")")), "eos_token_id"});
  cases.push_back(
      {"eos outside vocab", ToJson(With(base, "eos_token_id", "[1, 999999]")), "eos_token_id"});
  cases.push_back(
      {"tie not bool", ToJson(With(base, "tie_word_embeddings", "1")), "tie_word_embeddings"});
  cases.push_back({"unsupported act", ToJson(With(base, "hidden_act", R"("gelu")")), "hidden_act"});
  cases.push_back({"bad JSON", "{\"vocab_size\": 12,", "config.json"});
  cases.push_back({"not an object", "[1, 2]", "config.json"});
  cases.push_back({"empty", "", "config.json"});
  return cases;
}

TEST(ModelConfigTest, MalformedConfigsNameTheField) {
  for (const BadCase& bad : BadCases()) {
    absl::StatusOr<ModelConfig> c = ParseModelConfig(bad.json);
    ASSERT_FALSE(c.ok()) << bad.label;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad.label;
    EXPECT_NE(std::string(c.status().message()).find(bad.field), std::string::npos)
        << bad.label << ": " << c.status();
  }
}

class ModelConfigDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("model_config_test_", ::pkv::testing::TestSeed(), "_",
                        reinterpret_cast<uintptr_t>(this));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(ModelConfigDirTest, GenerationConfigAddsEosIds) {
  Write("config.json", ToJson(Without(Llama3Config(), "bos_token_id")));
  Write("generation_config.json", R"({"bos_token_id": 128000, "eos_token_id": [128001, 128009]})");
  absl::StatusOr<ModelConfig> c = LoadModelConfig(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{128001, 128009}));
  EXPECT_EQ(c->bos_token_id, 128000);
}

TEST_F(ModelConfigDirTest, GenerationConfigIsOptionalButMustBeValid) {
  Write("config.json", ToJson(Llama3Config()));
  absl::StatusOr<ModelConfig> c = LoadModelConfig(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{128001});
  Write("generation_config.json", R"({"eos_token_id": 1.5})");
  c = LoadModelConfig(dir_.string());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(c.status().message()).find("generation_config.json"), std::string::npos);
}

TEST_F(ModelConfigDirTest, MissingConfigIsNotFound) {
  EXPECT_EQ(LoadModelConfig(dir_.string()).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pkv
