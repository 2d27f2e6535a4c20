// pkv-make-model's library: shapes, config.json writer, streaming safetensors writer, random
// model directories read back through the runtime's own loaders.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "tests/harness/test_seed.h"
#include "worker/model/checkpoint.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/llama_weights.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/random_model.h"
#include "worker/tools/safetensors_writer.h"

namespace pkv {
namespace {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = (std::filesystem::path(::testing::TempDir()) /
             absl::StrCat("make_model_test_", ::getpid(), "_", counter++))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int64_t NumParams(const ModelConfig& c) {
  int64_t n = 0;
  for (const TensorSpec& s : LlamaTensorSpecs(c)) n += s.numel();
  return n;
}

TEST(ModelShapesTest, RealShapesHaveThePublishedParameterCounts) {
  // Published totals: Llama-3.1-8B 8,030,261,248; Llama-3.2-1B 1,235,814,400 (tied head).
  EXPECT_EQ(NumParams(*ModelShapeConfig("llama3-8b")), 8030261248);
  EXPECT_EQ(NumParams(*ModelShapeConfig("llama3-1b")), 1235814400);
  const ModelConfig tiny = *ModelShapeConfig("tiny");
  EXPECT_EQ(tiny.vocab_size, 512);
  EXPECT_EQ(tiny.eos_token_ids, std::vector<int32_t>{511});
  EXPECT_EQ(tiny.bos_token_id, 510);
  EXPECT_TRUE(tiny.tie_word_embeddings);
  absl::StatusOr<ModelConfig> bad = ModelShapeConfig("gpt2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("llama3-8b"), std::string::npos);
}

TEST(ModelShapesTest, ConfigJsonRoundTrips) {
  for (const std::string& name : ModelShapeNames()) {
    const ModelConfig c = *ModelShapeConfig(name);
    absl::StatusOr<ModelConfig> back = ParseModelConfig(ModelConfigToJson(c));
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_EQ(back->architecture, c.architecture);
    EXPECT_EQ(back->model_type, c.model_type);
    EXPECT_EQ(back->vocab_size, c.vocab_size);
    EXPECT_EQ(back->hidden_size, c.hidden_size);
    EXPECT_EQ(back->intermediate_size, c.intermediate_size);
    EXPECT_EQ(back->num_layers, c.num_layers);
    EXPECT_EQ(back->num_q_heads, c.num_q_heads);
    EXPECT_EQ(back->num_kv_heads, c.num_kv_heads);
    EXPECT_EQ(back->head_dim, c.head_dim);
    EXPECT_EQ(back->max_position_embeddings, c.max_position_embeddings);
    EXPECT_EQ(back->rms_norm_eps, c.rms_norm_eps);
    EXPECT_EQ(back->rope_theta, c.rope_theta);
    EXPECT_EQ(back->rope_scaling.type, c.rope_scaling.type);
    EXPECT_EQ(back->rope_scaling.factor, c.rope_scaling.factor);
    EXPECT_EQ(back->rope_scaling.original_max_position_embeddings,
              c.rope_scaling.original_max_position_embeddings);
    EXPECT_EQ(back->tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_EQ(back->eos_token_ids, c.eos_token_ids);
    EXPECT_EQ(back->bos_token_id, c.bos_token_id);
  }
}

TEST(RandomModelTest, GeneratorHasTheDocumentedScale) {
  const uint64_t key = RandomTensorKey(::pkv::testing::TestSeed(), "w");
  double sum = 0, sum_sq = 0, norm_sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = RandomWeightValue(TensorSpec::Kind::kMatrix, key, i);
    sum += v;
    sum_sq += v * v;
    norm_sum += RandomWeightValue(TensorSpec::Kind::kNorm, key, i);
    ASSERT_LT(std::abs(v), 0.02 * 3.5);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 0.0005);
  EXPECT_NEAR(norm_sum / n, 1.0, 0.001);
  EXPECT_NE(RandomTensorKey(1, "a"), RandomTensorKey(2, "a"));
  EXPECT_NE(RandomTensorKey(1, "a"), RandomTensorKey(1, "b"));
}

float RoundTo(DType dtype, float v) {
  if (dtype == DType::kBF16) return ToFloat(ToBFloat16(v));
  if (dtype == DType::kF16) return ToFloat(ToHalf(v));
  return v;
}

// Every element read back through Checkpoint + LoadLlamaWeightsF32 equals the generator's value
// rounded to the file's dtype.
void ExpectWeightsMatchGenerator(const LlamaWeights& w, uint64_t seed, DType dtype) {
  LlamaWeights copy = w;
  for (const LlamaTensorSlot& slot : LlamaTensorSlots(&copy)) {
    const uint64_t key = RandomTensorKey(seed, slot.spec.name);
    ASSERT_EQ(static_cast<int64_t>(slot.dst->size()), slot.spec.numel()) << slot.spec.name;
    for (int64_t i = 0; i < slot.spec.numel(); ++i) {
      ASSERT_EQ((*slot.dst)[i], RoundTo(dtype, RandomWeightValue(slot.spec.kind, key, i)))
          << slot.spec.name << "[" << i << "]";
    }
  }
}

TEST(RandomModelTest, TinyModelLoadsAndRuns) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    TempDir dir;
    RandomModelOptions opt;
    opt.out_dir = dir.path() + "/m";
    opt.config = *ModelShapeConfig("tiny");
    opt.dtype = dtype;
    opt.seed = 42;
    absl::StatusOr<RandomModelResult> res = WriteRandomModel(opt);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->num_shards, 1);
    EXPECT_TRUE(std::filesystem::exists(opt.out_dir + "/model.safetensors"));
    absl::StatusOr<ModelConfig> config = LoadModelConfig(opt.out_dir);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->torch_dtype, TorchDtypeName(dtype));
    EXPECT_EQ(config->eos_token_ids, std::vector<int32_t>{511});
    auto ckpt = Checkpoint::Open(opt.out_dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ((*ckpt)->TensorNames().size(), LlamaTensorSpecs(*config).size());
    EXPECT_EQ((*ckpt)->Get("model.norm.weight")->dtype(), dtype);
    absl::StatusOr<LlamaWeights> w = LoadLlamaWeightsF32(*config, **ckpt);
    ASSERT_TRUE(w.ok()) << w.status();
    ExpectWeightsMatchGenerator(*w, 42, dtype);

    absl::StatusOr<std::unique_ptr<ModelBackend>> backend = LoadCpuBackend(opt.out_dir, 16, 8);
    ASSERT_TRUE(backend.ok()) << backend.status();
    std::vector<int32_t> tokens = {510, 72, 101, 108, 108, 111};
    std::vector<int32_t> pages = {5, 2, 7};
    SamplingParams params;
    params.temperature = 0.8f;
    params.seed = 3;
    for (int step = 0; step < 20; ++step) {
      BatchRow row;
      const int32_t start = step == 0 ? 0 : static_cast<int32_t>(tokens.size()) - 1;
      row.tokens = tokens.data() + start;
      row.num_tokens = static_cast<int32_t>(tokens.size()) - start;
      row.start_pos = start;
      row.pages = pages.data();
      row.num_pages = 3;
      row.sample = true;
      row.params = &params;
      row.sample_index = step;
      std::vector<SampleResult> out;
      ASSERT_TRUE((*backend)->Step({&row, 1}, &out, nullptr).ok());
      ASSERT_EQ(out.size(), 1u);
      ASSERT_GE(out[0].token_id, 0);
      ASSERT_LT(out[0].token_id, 512);
      tokens.push_back(out[0].token_id);
    }
  }
}

TEST(RandomModelTest, ShardedWriteEqualsSingleFile) {
  TempDir dir;
  RandomModelOptions opt;
  opt.config = *ModelShapeConfig("tiny");
  opt.config.tie_word_embeddings = false;  // exercise lm_head too
  opt.dtype = DType::kF32;
  opt.seed = 9;
  opt.out_dir = dir.path() + "/single";
  ASSERT_TRUE(WriteRandomModel(opt).ok());
  opt.out_dir = dir.path() + "/sharded";
  opt.max_shard_bytes = 40000;  // several tensors per shard, the 128 KiB embedding alone
  absl::StatusOr<RandomModelResult> res = WriteRandomModel(opt);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_GT(res->num_shards, 3);
  EXPECT_TRUE(std::filesystem::exists(opt.out_dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(std::filesystem::exists(
      absl::StrFormat("%s/model-00001-of-%05d.safetensors", opt.out_dir, res->num_shards)));
  auto a = LoadCpuBackend(dir.path() + "/single", 4, 4);
  auto b = LoadCpuBackend(dir.path() + "/sharded", 4, 4);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<int32_t> tokens = {1, 2, 3, 400, 500, 6, 7};
  std::vector<int32_t> pages = {0, 1};
  BatchRow row{tokens.data(), 7, 0, pages.data(), 2, true, nullptr, 0};
  std::vector<float> la, lb;
  ASSERT_TRUE((*a)->Forward({&row, 1}, &la).ok());
  ASSERT_TRUE((*b)->Forward({&row, 1}, &lb).ok());
  EXPECT_EQ(la, lb);
  for (float v : la) ASSERT_TRUE(std::isfinite(v));
  // Writing a single file over the sharded directory removes the stale index.
  opt.max_shard_bytes = int64_t{1} << 30;
  ASSERT_TRUE(WriteRandomModel(opt).ok());
  EXPECT_FALSE(std::filesystem::exists(opt.out_dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(LoadCpuBackend(opt.out_dir, 4, 4).ok());
}

TEST(RandomModelTest, ShapeMismatchNamesTensorAndShapes) {
  TempDir dir;
  RandomModelOptions opt;
  opt.out_dir = dir.path();
  opt.config = *ModelShapeConfig("tiny");
  ASSERT_TRUE(WriteRandomModel(opt).ok());
  ModelConfig other = opt.config;
  other.intermediate_size = 96;
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  absl::Status st = ValidateLlamaCheckpoint(other, **ckpt);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("model.layers.0.mlp.gate_proj.weight"),
            std::string::npos)
      << st;
  EXPECT_NE(std::string(st.message()).find("[128, 64]"), std::string::npos) << st;
  EXPECT_NE(std::string(st.message()).find("[96, 64]"), std::string::npos) << st;
  other = opt.config;
  other.tie_word_embeddings = false;  // now lm_head.weight is required
  st = ValidateLlamaCheckpoint(other, **ckpt);
  EXPECT_NE(std::string(st.message()).find("lm_head.weight"), std::string::npos) << st;
}

TEST(SafetensorsWriterTest, StreamedChunksRoundTripAndOverrunsFail) {
  TempDir dir;
  const std::string path = dir.path() + "/t.safetensors";
  std::vector<PlannedTensor> planned = {{"x", DType::kF32, {3, 7}}, {"y", DType::kBF16, {5}}};
  auto w = SafetensorsWriter::Create(path, planned);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<uint8_t> data(3 * 7 * 4 + 5 * 2);
  std::mt19937 rng(1);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  for (size_t pos = 0; pos < data.size();) {  // uneven chunks
    const size_t n = std::min<size_t>(1 + rng() % 13, data.size() - pos);
    ASSERT_TRUE((*w)->Append({data.data() + pos, n}).ok());
    pos += n;
  }
  EXPECT_EQ((*w)->Append({data.data(), 1}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*w)->Finish().ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->header().data_offset % 8, 0u);
  auto x = (*f)->Data(*(*f)->Find("x"));
  auto y = (*f)->Data(*(*f)->Find("y"));
  EXPECT_TRUE(std::equal(x.begin(), x.end(), data.begin()));
  EXPECT_TRUE(std::equal(y.begin(), y.end(), data.begin() + 84));
  // Finishing short of the plan is an error.
  auto short_writer = SafetensorsWriter::Create(dir.path() + "/s.safetensors", planned);
  ASSERT_TRUE(short_writer.ok());
  ASSERT_TRUE((*short_writer)->Append({data.data(), 10}).ok());
  EXPECT_FALSE((*short_writer)->Finish().ok());
}

// The binary end to end, when it has been built (it links the tokenizer).
TEST(MakeModelBinaryTest, TinyShape) {
  const char* bin_dir = std::getenv("PKV_BIN_DIR");
  const std::string bin = absl::StrCat(bin_dir ? bin_dir : "", "/pkv-make-model");
  if (bin_dir == nullptr || !std::filesystem::exists(bin)) GTEST_SKIP() << bin << " not built";
  TempDir dir;
  const std::string out = dir.path() + "/tiny";
  const std::string cmd =
      absl::StrCat(bin, " --out ", out, " --shape tiny --seed 5 > ", dir.path(), "/log.txt 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* f :
       {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  }
  std::stringstream tok;
  tok << std::ifstream(out + "/tokenizer.json").rdbuf();
  absl::StatusOr<JsonValue> tok_json = ParseJson(tok.str());
  ASSERT_TRUE(tok_json.ok()) << tok_json.status();
  // The tokenizer's specials are the config's bos (510) and eos (511).
  const JsonValue* added = tok_json->Find("added_tokens");
  ASSERT_TRUE(added != nullptr && added->is_array());
  int found = 0;
  for (const JsonValue& t : added->items()) {
    const JsonValue* id = t.Find("id");
    const JsonValue* content = t.Find("content");
    ASSERT_TRUE(id && content && id->is_integer() && content->is_string());
    if (id->integer() == 510) found += content->str() == "<|begin_of_text|>";
    if (id->integer() == 511) found += content->str() == "<|end_of_text|>";
  }
  EXPECT_EQ(found, 2);
  auto backend = LoadCpuBackend(out, 16, 4);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->config().vocab_size, 512);
  // Same seed, same weights.
  auto ckpt = Checkpoint::Open(out);
  ASSERT_TRUE(ckpt.ok());
  auto w = LoadLlamaWeightsF32((*backend)->config(), **ckpt);
  ASSERT_TRUE(w.ok());
  ExpectWeightsMatchGenerator(*w, 5, DType::kBF16);
  // Bad flags fail with a message.
  EXPECT_NE(std::system(absl::StrCat(bin, " --out ", out, " --shape nope 2>/dev/null").c_str()), 0);
  EXPECT_NE(std::system(absl::StrCat(bin, " --out ", out, " --dtype int8 2>/dev/null").c_str()), 0);
}

}  // namespace
}  // namespace pkv

namespace pkv {
namespace {

// Opt-in smoke test of a real-size directory written by pkv-make-model (e.g. --shape llama3-1b):
// PKV_LARGE_MODEL_DIR=/path ./make_model_test --gtest_filter=*LargeShape*. Activations must stay
// finite through every layer of a randomly initialised real shape.
TEST(LargeShapeSmokeTest, ForwardStaysFinite) {
  const char* dir = std::getenv("PKV_LARGE_MODEL_DIR");
  if (dir == nullptr) GTEST_SKIP() << "PKV_LARGE_MODEL_DIR not set";
  auto backend = LoadCpuBackend(dir, 16, 2);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const int32_t vocab = (*backend)->config().vocab_size;
  std::vector<int32_t> tokens = {vocab - 2, 1000, 2000, 3000, 4000, 5000, 6000, 7000};
  std::vector<int32_t> pages = {1, 0};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int step = 0; step < 4; ++step) {
    const int32_t start = step == 0 ? 0 : static_cast<int32_t>(tokens.size()) - 1;
    BatchRow row{tokens.data() + start,
                 static_cast<int32_t>(tokens.size()) - start,
                 start,
                 pages.data(),
                 2,
                 true,
                 &greedy,
                 step};
    std::vector<float> logits;
    ASSERT_TRUE((*backend)->Forward({&row, 1}, &logits).ok());
    double sum_sq = 0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      sum_sq += double{v} * v;
    }
    std::printf("step %d: logit rms %.4f\n", step, std::sqrt(sum_sq / logits.size()));
    tokens.push_back(
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
}

}  // namespace
}  // namespace pkv
