// The CUDA backend on quantized checkpoints (AWQ, GPTQ, FP8 as pkv-make-model writes them) against
// the CPU backend, which dequantizes the same files to float32 (the oracle): prefill (steps of
// more than 64 tokens: cuBLAS on the projection dequantized into scratch), then decode steps of
// 1, 3, 8 (the fused GEMV on packed weights; the quantized-weight GEMM when the fused path is
// off), 20 rows (the quantized-weight GEMM, kernels/model/qgemm.h) and 64 rows (this model's
// small projections: dequantized + cuBLAS, ChoosePackedRoute), logits within a bound and greedy
// tokens equal; plus the packed memory footprint and the clear refusal of a group size the
// kernels do not run.
//
// Bound: the GPU dequantizes each weight exactly as the CPU does and rounds it once to the
// compute dtype (relative 2^-9 bf16, 2^-11 fp16, independent signs), the same order as the
// rounding of activations and K/V the dense comparison (cuda_backend_test.cc) already bounds by
// rel_l2 0.06 (bf16) / 0.015 (fp16); the sum of two such independent errors stays below
// sqrt(2) times the larger, so rel_l2 <= 0.08 (bf16) / 0.025 (fp16) and max_abs <= 10% / 4% of
// max |ref|. A wrong nibble order, group, scale or row concatenation gives O(1) errors.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/device/model_test_util.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/model/cpu_backend.h"
#include "worker/tools/quantize.h"

namespace pkv {
namespace {

using ::pkv::testing::ArgMax;
using ::pkv::testing::CompareLogits;
using ::pkv::testing::LogitError;
using ::pkv::testing::Row;
using ::pkv::testing::Seq;
using ::pkv::testing::ShuffledPagePool;

constexpr int32_t kPageSize = 16;
constexpr int32_t kPool = 2048;

struct QuantCase {
  std::string method;  // awq | gptq | fp8
  bool gptq_sym = true;
  std::string fp8_strategy = "channel";
  DType dtype = DType::kF16;
  bool fused = true;
  int32_t prenorm = 0;  // CudaBackendOptions::fused_prenorm_min_tokens
};

std::string CaseName(const ::testing::TestParamInfo<QuantCase>& info) {
  const QuantCase& c = info.param;
  return c.method + (c.method == "gptq" ? (c.gptq_sym ? "_sym" : "_asym") : "") +
         (c.method == "fp8" ? "_" + c.fp8_strategy : "") + "_" + std::string(DTypeName(c.dtype)) +
         (c.fused ? "_fused" : "_cublas") +
         (c.prenorm > 0 ? "_prenorm" + std::to_string(c.prenorm) : "");
}

using ::pkv::testing::QuantTestConfig;

absl::Status WriteQuantModel(const std::string& dir, const QuantCase& qc, int32_t group) {
  QuantFlags f;
  f.method = qc.method;
  f.group_size = group;
  f.gptq_sym = qc.gptq_sym;
  f.fp8_strategy = qc.fp8_strategy;
  return testing::WriteQuantModel(dir, QuantTestConfig(), qc.dtype, f);
}

CudaBackendOptions GpuOptions(bool fused, int32_t prenorm = 0) {
  CudaBackendOptions o;
  o.page_size = kPageSize;
  o.num_kv_pages = kPool;
  o.max_step_tokens = 1024;
  o.max_rows = 64;
  o.fused_small_batch = fused;
  o.fused_prenorm_min_tokens = prenorm;
  return o;
}

class QuantizedBackendTest : public ::testing::TestWithParam<QuantCase> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/pkv_quant_backend_" + CaseName({GetParam(), 0});
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(WriteQuantModel(dir_, GetParam(), 128).ok());
    auto cpu = LoadCpuBackend(dir_, kPageSize, kPool);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
    auto gpu = CudaModelBackend::Load(dir_, GpuOptions(GetParam().fused, GetParam().prenorm));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *std::move(gpu);
    if (GetParam().fused) {
      ASSERT_TRUE(gpu_->fused_available());
    }
    vocab_ = cpu_->config().vocab_size;
  }

  Seq NewSeq(int32_t len, int32_t capacity) {
    Seq s;
    s.tokens.resize(len);
    for (int32_t& t : s.tokens) t = static_cast<int32_t>(rng_() % (vocab_ - 2));
    s.pages = pages_.Take((capacity + kPageSize - 1) / kPageSize);
    return s;
  }

  // Forward on both backends; checks every row's logits against the bound above and returns the
  // CPU's (ref) and the GPU's (got).
  void ForwardBoth(const std::vector<BatchRow>& rows, std::vector<float>* ref,
                   std::vector<float>* got) {
    ASSERT_TRUE(cpu_->Forward(rows, ref).ok());
    absl::Status st = gpu_->Forward(rows, got);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(got->size(), ref->size());
    const bool fp16 = GetParam().dtype == DType::kF16;
    for (size_t r = 0; r < ref->size() / vocab_; ++r) {
      const LogitError e = CompareLogits(&(*got)[r * vocab_], &(*ref)[r * vocab_], vocab_);
      EXPECT_EQ(e.non_finite, 0);
      EXPECT_LE(e.rel_l2, fp16 ? 0.025 : 0.08) << "row " << r << " max_abs " << e.max_abs;
      EXPECT_LE(e.max_abs, (fp16 ? 0.04 : 0.10) * e.max_ref + 1e-3) << "row " << r;
    }
  }

  std::string dir_;
  std::unique_ptr<ModelBackend> cpu_;
  std::unique_ptr<CudaModelBackend> gpu_;
  int32_t vocab_ = 0;
  std::mt19937 rng_{4321};
  ShuffledPagePool pages_{kPool, 17};
};

// Prefill 64 sequences (cuBLAS on dequantized projections for steps over 64 tokens), then
// greedy decode steps of 1, 3, 8, 20 and 64 rows through Forward (logits) and Step (tokens,
// CUDA graphs).
TEST_P(QuantizedBackendTest, PrefillAndDecodeMatchCpu) {
  constexpr int32_t kSeqs = 64, kSteps = 3;
  std::vector<Seq> seqs;
  std::vector<float> ref, got;
  for (int32_t i = 0; i < kSeqs; ++i) {
    const int32_t len = 5 + 7 * (i % 20);
    seqs.push_back(NewSeq(len, len + 4 * kSteps + 1));
  }
  for (int32_t i = 0; i < kSeqs; i += 5) {  // prefill, 5 sequences a step
    std::vector<BatchRow> rows;
    const int32_t end = std::min(kSeqs, i + 5);
    for (int32_t j = i; j < end; ++j) {
      rows.push_back(Row(seqs[j], 0, static_cast<int32_t>(seqs[j].tokens.size())));
    }
    ForwardBoth(rows, &ref, &got);
    for (int32_t j = i; j < end; ++j) {
      float m;
      seqs[j].tokens.push_back(ArgMax(&ref[(j - i) * vocab_], vocab_, &m));
    }
  }
  SamplingParams greedy;
  greedy.temperature = 0.f;
  int compared = 0;
  for (int32_t batch : {1, 3, 8, 20, 64}) {
    for (int32_t step = 0; step < kSteps; ++step) {
      std::vector<BatchRow> rows;
      for (int32_t i = 0; i < batch; ++i) {
        const int32_t pos = static_cast<int32_t>(seqs[i].tokens.size()) - 1;
        rows.push_back(Row(seqs[i], pos, pos + 1, true, &greedy, step));
      }
      ForwardBoth(rows, &ref, &got);
      std::vector<SampleResult> sampled;
      ASSERT_TRUE(gpu_->Step(rows, &sampled, nullptr).ok());
      ASSERT_EQ(sampled.size(), static_cast<size_t>(batch));
      for (int32_t i = 0; i < batch; ++i) {
        float margin = 0;
        const int32_t want = ArgMax(&ref[i * vocab_], vocab_, &margin);
        const LogitError e = CompareLogits(&got[i * vocab_], &ref[i * vocab_], vocab_);
        if (margin > 2 * e.max_abs) {
          ++compared;
          EXPECT_EQ(sampled[i].token_id, want) << "batch " << batch << " step " << step;
        }
        seqs[i].tokens.push_back(want);
      }
    }
  }
  EXPECT_GE(compared, (1 + 3 + 8 + 20 + 64) * kSteps / 2);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedBackendTest,
                         ::testing::Values(QuantCase{"awq", true, "channel", DType::kF16, true},
                                           QuantCase{"awq", true, "channel", DType::kF16, false},
                                           QuantCase{"gptq", true, "channel", DType::kF16, true},
                                           QuantCase{"gptq", false, "channel", DType::kBF16, true},
                                           QuantCase{"fp8", true, "channel", DType::kBF16, true},
                                           QuantCase{"fp8", true, "tensor", DType::kBF16, true},
                                           QuantCase{"fp8", true, "channel", DType::kBF16, false},
                                           // Fused steps of >= 3 tokens with the block inputs
                                           // normalized by RMSNorm launches.
                                           QuantCase{"awq", true, "channel", DType::kF16, true, 3},
                                           QuantCase{"fp8", true, "channel", DType::kBF16, true,
                                                     3}),
                         CaseName);

// The packed weights are what a step reads: the quantized twin of a random model reads exactly
// the packed bytes of its projections (4-bit: k / 2 + 4 k / 128 a row; fp8: k + 4) instead of 2 k.
TEST(QuantizedBackendMemory, PackedBytesReplaceDenseBytes) {
  const ModelConfig dense = QuantTestConfig();
  auto d = CudaModelBackend::LoadRandom(dense, 3, GpuOptions(true));
  ASSERT_TRUE(d.ok()) << d.status();
  for (const char* method : {"awq", "fp8"}) {
    ModelConfig qc = dense;
    QuantFlags f;
    f.method = method;
    qc.quant = *QuantConfigFromFlags(f);
    auto q = CudaModelBackend::LoadRandom(qc, 3, GpuOptions(true));
    ASSERT_TRUE(q.ok()) << q.status();
    ASSERT_TRUE((*q)->fused_available());
    EXPECT_EQ((*d)->weight_read_bytes() - (*q)->weight_read_bytes(),
              testing::PackedBytesSaved(dense, method, 1))
        << method;
    // The random packed weights run: one greedy step gives a valid token.
    const absl::StatusOr<int32_t> token = testing::GreedyTokenOf(q->get());
    ASSERT_TRUE(token.ok()) << token.status();
    EXPECT_GE(*token, 0);
    EXPECT_LT(*token, dense.vocab_size);
  }
}

// A 4-bit group of 64 columns is a valid AWQ checkpoint (the CPU backend runs it) that the CUDA
// kernels cannot: start-up stops naming the field.
TEST(QuantizedBackendErrors, Group64IsRefusedNamingTheField) {
  const std::string dir = ::testing::TempDir() + "/pkv_quant_backend_group64";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteQuantModel(dir, QuantCase{"awq"}, 64).ok());
  ASSERT_TRUE(LoadCpuBackend(dir, kPageSize, kPool).ok());
  auto gpu = CudaModelBackend::Load(dir, GpuOptions(true));
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gpu.status().message().find("quantization_config.group_size = 64"), std::string::npos)
      << gpu.status();
}

}  // namespace
}  // namespace pkv
