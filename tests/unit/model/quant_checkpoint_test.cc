// Quantized checkpoints written by pkv-make-model's library, read back by the runtime: the CPU
// backends serve them, the canonical matrices for the CUDA backend come out whole, and broken or
// mismatched checkpoints are refused naming the tensor.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/model/checkpoint.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/llama_weights.h"
#include "worker/model/quant_weights.h"
#include "worker/model/tp_cpu_backend.h"
#include "worker/model/tp_shard.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/quantize.h"
#include "worker/tools/random_model.h"
#include "worker/tools/safetensors_writer.h"

namespace pkv {
namespace {

class QuantCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("quant_checkpoint_test_", ::getpid(), "_", counter++))
               .string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes the tiny model quantized per `flags` into dir_/name.
  std::string Write(const std::string& name, const QuantFlags& flags) {
    RandomModelOptions opt;
    opt.out_dir = absl::StrCat(dir_, "/", name);
    opt.config = *ModelShapeConfig("tiny");
    opt.config.quant = *QuantConfigFromFlags(flags);
    opt.dtype = DType::kF16;
    opt.seed = 3;
    EXPECT_TRUE(WriteRandomModel(opt).ok());
    return opt.out_dir;
  }

  // Copies model.safetensors of `dir` with tensor `name` replaced by `bytes` (same size).
  void ReplaceTensor(const std::string& dir, const std::string& name,
                     const std::vector<uint8_t>& bytes) {
    const std::string path = dir + "/model.safetensors", tmp = path + ".tmp";
    {
      std::unique_ptr<Checkpoint> ckpt = *Checkpoint::Open(dir);
      std::vector<PlannedTensor> planned;
      for (const std::string& n : ckpt->TensorNames()) {
        const TensorView v = *ckpt->Get(n);
        planned.push_back({n, v.dtype(), v.shape()});
      }
      std::unique_ptr<SafetensorsWriter> w = *SafetensorsWriter::Create(tmp, planned);
      for (const std::string& n : ckpt->TensorNames()) {
        const TensorView v = *ckpt->Get(n);
        ASSERT_TRUE(w->Append(n == name ? absl::MakeConstSpan(bytes) : v.bytes).ok());
      }
      ASSERT_TRUE(w->Finish().ok());
    }
    std::filesystem::rename(tmp, path);
  }

  std::string dir_;
};

absl::Status LoadError(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<ModelBackend>> b = LoadCpuBackend(dir, 16, 4);
  return b.status();
}

TEST_F(QuantCheckpointTest, CpuBackendsServeEveryFormat) {
  for (const char* method : {"awq", "gptq", "fp8"}) {
    QuantFlags flags;
    flags.method = method;
    flags.group_size = 32;
    const std::string dir = Write(method, flags);
    absl::StatusOr<std::unique_ptr<ModelBackend>> cpu = LoadCpuBackend(dir, 16, 4);
    ASSERT_TRUE(cpu.ok()) << method << ": " << cpu.status();
    EXPECT_TRUE((*cpu)->config().quant.quantized());
    absl::StatusOr<std::unique_ptr<ModelBackend>> tp = LoadTpCpuBackend(dir, 2, 16, 4);
    ASSERT_TRUE(tp.ok()) << method << ": " << tp.status();
    // The canonical matrices a GPU backend would repack: all 7 projections of both layers.
    const ModelConfig config = *LoadModelConfig(dir);
    const std::unique_ptr<Checkpoint> ckpt = *Checkpoint::Open(dir);
    absl::StatusOr<QuantizedModelLinears> linears = LoadQuantizedLinears(config, *ckpt);
    ASSERT_TRUE(linears.ok()) << linears.status();
    ASSERT_EQ(linears->layers.size(), 2u);
    for (const QuantizedLayerLinears& layer : linears->layers) {
      for (const auto& p : layer.proj) ASSERT_TRUE(p.has_value());
    }
    const QuantizedLinear& down =
        *linears->layers[1].proj[static_cast<int>(LinearProjection::kDown)];
    if (down.method == QuantMethod::kFp8) {
      EXPECT_EQ(down.fp8.n, 64);
      EXPECT_EQ(down.fp8.k, 128);
      EXPECT_TRUE(CheckFp8Matrix(down.fp8).ok());
    } else {
      EXPECT_EQ(down.int4.n, 64);
      EXPECT_EQ(down.int4.k, 128);
      EXPECT_EQ(down.int4.group, 32);
      EXPECT_TRUE(CheckInt4GroupMatrix(down.int4).ok());
    }
    EXPECT_FALSE(linears->lm_head.has_value());  // tiny ties its LM head to the embedding
  }
}

TEST_F(QuantCheckpointTest, GptqPerRowGroupsLoadButDoNotSplit) {
  RandomModelOptions opt;
  opt.out_dir = dir_ + "/per_row";
  opt.config = *ModelShapeConfig("tiny");
  opt.config.quant.method = QuantMethod::kGptq;
  opt.config.quant.group_size = -1;
  opt.config.quant.sym = true;
  ASSERT_TRUE(WriteRandomModel(opt).ok());
  EXPECT_TRUE(LoadError(opt.out_dir).ok());
  absl::StatusOr<std::unique_ptr<ModelBackend>> tp = LoadTpCpuBackend(opt.out_dir, 2, 16, 4);
  EXPECT_EQ(tp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(tp.status().message()).find("group boundaries"), std::string::npos)
      << tp.status();
}

TEST_F(QuantCheckpointTest, RefusesMismatchedOrBrokenCheckpoints) {
  QuantFlags awq;
  awq.method = "awq";
  awq.group_size = 32;
  const std::string dir = Write("awq", awq);
  // A config that says GPTQ over AWQ tensors: GPTQ's qweight is [k/8][n], AWQ's [k][n/8].
  QuantFlags gptq = awq;
  gptq.method = "gptq";
  const std::string gptq_dir = Write("gptq", gptq);
  std::filesystem::copy_file(dir + "/model.safetensors", gptq_dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  absl::Status st = LoadError(gptq_dir);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message())
                .find("self_attn.q_proj.qweight' has shape [64, 8], "
                      "expected [8, 64]"),
            std::string::npos)
      << st;
  // A dense config over a quantized checkpoint.
  const std::string dense_dir = Write("dense", QuantFlags{});
  std::filesystem::copy_file(dir + "/model.safetensors", dense_dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  st = LoadError(dense_dir);
  EXPECT_NE(
      std::string(st.message()).find("has no tensor 'model.layers.0.self_attn.q_proj.weight'"),
      std::string::npos)
      << st;
}

TEST_F(QuantCheckpointTest, RefusesActOrderGroupIndex) {
  QuantFlags gptq;
  gptq.method = "gptq";
  gptq.group_size = 32;
  const std::string dir = Write("gptq", gptq);
  ASSERT_TRUE(LoadError(dir).ok());
  // Swap two input rows' groups, as an act-order checkpoint would.
  std::vector<int32_t> g_idx(64);
  for (int j = 0; j < 64; ++j) g_idx[j] = j / 32;
  std::swap(g_idx[0], g_idx[63]);
  std::vector<uint8_t> bytes(64 * 4);
  std::memcpy(bytes.data(), g_idx.data(), bytes.size());
  ReplaceTensor(dir, "model.layers.1.mlp.up_proj.g_idx", bytes);
  const absl::Status st = LoadError(dir);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("act-order"), std::string::npos) << st;
}

TEST_F(QuantCheckpointTest, RefusesQuantizedTensorsUnderADenseConfig) {
  QuantFlags fp8;
  fp8.method = "fp8";
  const std::string dir = Write("fp8", fp8);
  // The FP8 checkpoint keeps the name q_proj.weight, so without quantization_config the dense
  // path finds it and must refuse its dtype.
  std::ofstream(dir + "/config.json", std::ios::trunc)
      << ModelConfigToJson(*ModelShapeConfig("tiny"));
  const absl::Status st = LoadError(dir);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("has dtype F8_E4M3: dense weights must be"),
            std::string::npos)
      << st;
}

}  // namespace
}  // namespace pkv
