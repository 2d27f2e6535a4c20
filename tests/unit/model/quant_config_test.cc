// quantization_config parsing (configs as AutoAWQ, AutoGPTQ and llm-compressor write them; every
// unsupported field refused with its name and value), which modules are quantized, and the
// quantized-checkpoint validation and tensor-parallel group checks.
#include "worker/model/quant_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/model/model_config.h"
#include "worker/model/quant_linear.h"
#include "worker/model/tp_shard.h"

namespace pkv {
namespace {

constexpr char kBase[] =
    R"("model_type": "llama", "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
       "max_position_embeddings": 1024)";

absl::StatusOr<ModelConfig> Parse(const std::string& quant_json) {
  return ParseModelConfig(absl::StrCat("{", kBase, ", \"quantization_config\": ", quant_json, "}"));
}

// The error message of a config that must be refused (empty when it parses).
std::string Refusal(const std::string& quant_json) {
  absl::StatusOr<ModelConfig> c = Parse(quant_json);
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

constexpr char kAutoAwq[] =
    R"({"bits": 4, "group_size": 128, "modules_to_not_convert": null, "quant_method": "awq",
        "version": "gemm", "zero_point": true})";
constexpr char kAutoGptq[] =
    R"({"bits": 4, "damp_percent": 0.01, "desc_act": false, "group_size": 128,
        "model_file_base_name": null, "quant_method": "gptq", "static_groups": false,
        "sym": true, "true_sequential": true, "checkpoint_format": "gptq"})";
constexpr char kLlmCompressorFp8[] = R"({
  "config_groups": {"group_0": {
    "input_activations": {"actorder": null, "block_structure": null, "dynamic": true,
      "group_size": null, "num_bits": 8, "observer": null, "observer_kwargs": {},
      "strategy": "token", "symmetric": true, "type": "float"},
    "output_activations": null, "targets": ["Linear"],
    "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": null,
      "num_bits": 8, "observer": "minmax", "observer_kwargs": {}, "strategy": "channel",
      "symmetric": true, "type": "float"}}},
  "format": "float-quantized", "global_compression_ratio": 1.24, "ignore": ["lm_head"],
  "kv_cache_scheme": null, "quant_method": "compressed-tensors",
  "quantization_status": "compressed"})";

TEST(QuantConfigTest, NoQuantizationConfigIsDense) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(absl::StrCat("{", kBase, "}"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->quant.quantized());
  EXPECT_FALSE(IsQuantizedModule(c->quant, "model.layers.0.self_attn.q_proj"));
}

TEST(QuantConfigTest, ReadsTheRealToolsConfigs) {
  absl::StatusOr<ModelConfig> awq = Parse(kAutoAwq);
  ASSERT_TRUE(awq.ok()) << awq.status();
  EXPECT_EQ(awq->quant.method, QuantMethod::kAwq);
  EXPECT_EQ(awq->quant.group_size, 128);
  absl::StatusOr<ModelConfig> old_awq =
      Parse(R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM"})");
  ASSERT_TRUE(old_awq.ok()) << old_awq.status();
  EXPECT_EQ(old_awq->quant.group_size, 64);

  absl::StatusOr<ModelConfig> gptq = Parse(kAutoGptq);
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  EXPECT_EQ(gptq->quant.method, QuantMethod::kGptq);
  EXPECT_TRUE(gptq->quant.sym);
  EXPECT_FALSE(gptq->quant.gptq_v2);
  absl::StatusOr<ModelConfig> v2 = Parse(
      R"({"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": false,
          "checkpoint_format": "gptq_v2"})");
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_TRUE(v2->quant.gptq_v2);
  EXPECT_FALSE(v2->quant.sym);
  EXPECT_EQ(Int4GroupOf(v2->quant, 4096), 4096);  // -1: one group per row

  absl::StatusOr<ModelConfig> fp8 = Parse(kLlmCompressorFp8);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->quant.method, QuantMethod::kFp8);
  EXPECT_FALSE(fp8->quant.fp8_per_tensor);
}

TEST(QuantConfigTest, RefusesUnsupportedFieldsNamingThem) {
  EXPECT_EQ(Refusal(R"({"quant_method": "gptq", "bits": 3, "group_size": 128})"),
            "config.json quantization_config.bits = 3: only 4-bit GPTQ is supported");
  EXPECT_EQ(Refusal(R"({"quant_method": "awq", "bits": 8})"),
            "config.json quantization_config.bits = 8: only 4-bit AWQ is supported");
  EXPECT_NE(Refusal(R"({"quant_method": "gptq", "bits": 4, "desc_act": true})")
                .find("quantization_config.desc_act = true: act-order"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"quant_method": "bitsandbytes"})")
                .find("quant_method = 'bitsandbytes': not supported"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"quant_method": "awq", "version": "gemv"})").find("version = 'gemv'"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"quant_method": "awq", "zero_point": false})").find("zero_point = false"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"quant_method": "awq", "group_size": 100})").find("group_size = 100"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"quant_method": "gptq", "checkpoint_format": "marlin"})")
                .find("checkpoint_format = 'marlin'"),
            std::string::npos);
  std::string block = kLlmCompressorFp8;
  block.replace(block.find("\"channel\""), 9, "\"block\"");
  EXPECT_NE(Refusal(block).find("config_groups.group_0.weights.strategy = 'block'"),
            std::string::npos);
  std::string int8 = kLlmCompressorFp8;
  int8.replace(int8.rfind("\"float\""), 7, "\"int\"");
  EXPECT_NE(Refusal(int8).find("weights.type = 'int'"), std::string::npos);
  std::string static_act = kLlmCompressorFp8;
  static_act.replace(static_act.find("\"dynamic\": true"), 15, "\"dynamic\": false");
  EXPECT_NE(Refusal(static_act).find("input_activations.dynamic = false"), std::string::npos);
  std::string packed = kLlmCompressorFp8;
  packed.replace(packed.find("float-quantized"), 15, "pack-quantized");
  EXPECT_NE(Refusal(packed).find("format = 'pack-quantized'"), std::string::npos);
  EXPECT_NE(Refusal("[1]").find("must be an object"), std::string::npos);
  std::string bad_regex = kLlmCompressorFp8;
  bad_regex.replace(bad_regex.find("[\"lm_head\"]"), 11, "[\"re:((\"]");
  EXPECT_NE(Refusal(bad_regex).find("ignore = 're:((': is not a valid regular expression"),
            std::string::npos);
  std::string long_regex = kLlmCompressorFp8;
  long_regex.replace(long_regex.find("[\"lm_head\"]"), 11,
                     absl::StrCat("[\"re:", std::string(300, 'a'), "\"]"));
  EXPECT_NE(Refusal(long_regex).find("longer than 256"), std::string::npos);
}

TEST(QuantConfigTest, QuantizesTheSevenProjectionsUnlessIgnored) {
  QuantConfig awq;
  awq.method = QuantMethod::kAwq;
  awq.group_size = 128;
  for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                        "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    EXPECT_TRUE(IsQuantizedModule(awq, absl::StrCat("model.layers.11.", p))) << p;
  }
  EXPECT_FALSE(IsQuantizedModule(awq, "lm_head"));
  EXPECT_FALSE(IsQuantizedModule(awq, "model.embed_tokens"));
  awq.not_converted = {"down_proj"};  // AutoAWQ: substring match
  EXPECT_FALSE(IsQuantizedModule(awq, "model.layers.1.mlp.down_proj"));
  EXPECT_TRUE(IsQuantizedModule(awq, "model.layers.1.mlp.up_proj"));

  QuantConfig fp8;
  fp8.method = QuantMethod::kFp8;
  EXPECT_TRUE(IsQuantizedModule(fp8, "lm_head"));  // compressed-tensors targets every Linear
  fp8.not_converted = {"lm_head", "re:.*layers\\.0\\..*"};
  EXPECT_FALSE(IsQuantizedModule(fp8, "lm_head"));
  EXPECT_FALSE(IsQuantizedModule(fp8, "model.layers.0.mlp.up_proj"));
  EXPECT_TRUE(IsQuantizedModule(fp8, "model.layers.10.mlp.up_proj"));
}

TEST(QuantConfigTest, TensorSpecsFollowEachFormat) {
  QuantConfig q;
  q.method = QuantMethod::kAwq;
  q.group_size = 128;
  auto specs = QuantLinearTensorSpecs(q, "m", 512, 256);
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ((*specs)[0].shapes[0], (std::vector<int64_t>{256, 64}));  // qweight [k][n/8]
  EXPECT_EQ((*specs)[1].shapes[0], (std::vector<int64_t>{2, 64}));    // qzeros [k/G][n/8]
  EXPECT_EQ((*specs)[2].shapes[0], (std::vector<int64_t>{2, 512}));   // scales [k/G][n]
  q.method = QuantMethod::kGptq;
  specs = QuantLinearTensorSpecs(q, "m", 512, 256);
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ((*specs)[0].shapes[0], (std::vector<int64_t>{32, 512}));  // qweight [k/8][n]
  EXPECT_EQ((*specs)[3].name, "m.g_idx");
  EXPECT_FALSE((*specs)[3].required);
  absl::StatusOr<std::vector<QuantTensorSpec>> bad = QuantLinearTensorSpecs(q, "m", 512, 192);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("group_size 128"), std::string::npos);
  q.method = QuantMethod::kFp8;
  specs = QuantLinearTensorSpecs(q, "m", 512, 256);
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ((*specs)[0].dtypes[0], DType::kF8E4M3);
  EXPECT_EQ((*specs)[1].shapes[0], (std::vector<int64_t>{512, 1}));
}

TEST(QuantConfigTest, TensorParallelSplitsOnlyOnGroupBoundaries) {
  absl::StatusOr<ModelConfig> c = Parse(kAutoAwq);  // o_proj in 256, down_proj in 512
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(ValidateTensorParallel(*c, 2).ok());  // 128 and 256 columns per rank
  c->num_q_heads = 4;
  c->num_kv_heads = 4;
  const absl::Status st = ValidateTensorParallel(*c, 4);  // o_proj: 64 columns per rank
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("o_proj"), std::string::npos) << st;
  EXPECT_NE(std::string(st.message()).find("group_size 128"), std::string::npos) << st;
  EXPECT_NE(std::string(st.message()).find("valid --tp for this model: 1, 2"), std::string::npos)
      << st;
}

}  // namespace
}  // namespace pkv
