// Tensor parallelism on the CUDA backend (worker/cuda_backend/tp_cuda_backend.h) over quantized
// weights and FP8 KV pages, against the CPU backend (the oracle) loading the same files: TP = 2
// with both ranks sharing this GPU (SharedDeviceGroup), and TP = 1 over NCCL (CUDA graphs). Each
// rank packs its slice of the AWQ, GPTQ or FP8 projections (q/k/v/gate/up by output rows, o/down by
// input columns on whole 4-bit groups, with their scales and zero points) and keeps its KV heads as
// FP8 codes. A prefill (one prompt chunked over two steps), then greedy decode steps of 1, 3 and 8
// rows: every row's logits within the bound below of the CPU's, and Step()'s greedy token equal to
// the CPU's argmax wherever its top-2 margin exceeds twice the row's logit error. Also: the packed
// bytes a rank reads, the FP8 pool's bytes and pages against the one-GPU backend's, and the
// refusals (a --tp that splits a 4-bit group, an FP8 slice the kernels cannot run).
//
// Bound: quantized_backend_test.cc's, rel_l2 <= 0.08 (bf16) / 0.025 (fp16) and max_abs <= 10% /
// 4% of max |ref|. TP adds the rounding of each rank's partial o_proj / down output to the 16-bit
// type before the all-reduce, the order of the activation rounding those bounds carry with
// headroom. FP8 KV: both backends write E4M3 codes with scale 1.0 (round to nearest even,
// saturating); the GPU's values before quantization differ from the CPU's by 16-bit rounding, so
// a code moves (one 2^-4 step) only where a value sits next to a rounding boundary, a fraction of
// the whole FP8-vs-16-bit drift, which is ~0.01 rel_l2 on these 0.02-scale random models
// (cuda_backend_fp8_test.cc). A wrong slice, group, scale or head gives O(1) errors.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/device/model_test_util.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/tp_cuda_backend.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/tp_cpu_backend.h"
#include "worker/tools/quantize.h"

namespace pkv {
namespace {

using ::pkv::testing::ArgMax;
using ::pkv::testing::CompareLogits;
using ::pkv::testing::LogitError;
using ::pkv::testing::QuantTestConfig;
using ::pkv::testing::Row;
using ::pkv::testing::Seq;
using ::pkv::testing::ShuffledPagePool;

constexpr int32_t kPageSize = 16;
constexpr int32_t kPool = 256;

struct TpQuantCase {
  std::string method;  // none | awq | gptq | fp8
  bool gptq_sym = true;
  std::string fp8_strategy = "channel";
  DType dtype = DType::kBF16;
  KvCacheDtype kv = KvCacheDtype::kAuto;
  // shared: TP = 2 on this GPU (eager steps); nccl: TP = 1 over NCCL (world size 1), its decode
  // steps CUDA graphs capturing the collectives and the dequantize kernels.
  std::string comm = "shared";
};

std::string CaseName(const ::testing::TestParamInfo<TpQuantCase>& info) {
  const TpQuantCase& c = info.param;
  return c.method + (c.method == "gptq" ? (c.gptq_sym ? "_sym" : "_asym") : "") +
         (c.method == "fp8" ? "_" + c.fp8_strategy : "") + "_" + std::string(DTypeName(c.dtype)) +
         "_kv_" + KvCacheDtypeName(c.kv) + "_" + c.comm;
}

QuantFlags FlagsOf(const TpQuantCase& c, int32_t group = 128) {
  QuantFlags f;
  f.method = c.method;
  f.group_size = group;
  f.gptq_sym = c.gptq_sym;
  f.fp8_strategy = c.fp8_strategy;
  return f;
}

std::string NewDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/pkv_cuda_tp_quant_" + name + "_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

// TP over `devices` (shared: every rank on GPU 0), a fixed pool of kPool pages unless `pages`.
TpCudaOptions TpOptions(std::vector<int> devices, KvCacheDtype kv, int64_t pages = kPool,
                        const std::string& comm = "shared") {
  TpCudaOptions t;
  t.backend.page_size = kPageSize;
  t.backend.num_kv_pages = pages;
  t.backend.max_step_tokens = 1024;
  t.backend.max_rows = 16;
  t.backend.kv_cache_dtype = kv;
  t.devices = std::move(devices);
  t.communicator = comm;
  return t;
}

class CudaTpQuantTest : public ::testing::TestWithParam<TpQuantCase> {
 protected:
  void SetUp() override {
    const TpQuantCase& c = GetParam();
    dir_ = NewDir(CaseName({c, 0}));
    ASSERT_TRUE(testing::WriteQuantModel(dir_, QuantTestConfig(), c.dtype, FlagsOf(c)).ok());
    auto cpu = LoadCpuBackend(dir_, kPageSize, kPool, c.kv);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
    const bool nccl = c.comm == "nccl";
    auto tp = TpCudaBackend::Load(
        dir_, TpOptions(nccl ? std::vector<int>{0} : std::vector<int>{0, 0}, c.kv, kPool, c.comm));
    ASSERT_TRUE(tp.ok()) << tp.status();
    tp_ = *std::move(tp);
    ASSERT_EQ(tp_->tp(), nccl ? 1 : 2);
    ASSERT_EQ(tp_->cuda_graphs(), nccl);
    ASSERT_EQ(tp_->kv_cache_dtype(), c.kv);
    ASSERT_EQ(tp_->num_kv_pages(), kPool);
    vocab_ = cpu_->config().vocab_size;
  }

  void TearDown() override {
    if (rows_ == 0) return;
    std::printf(
        "[tp quant] %s: %lld rows vs the CPU: rel_l2 max %.5f, max_abs/max_ref max %.5f; "
        "%d greedy tokens compared\n",
        CaseName({GetParam(), 0}).c_str(), static_cast<long long>(rows_), worst_rel_l2_,
        worst_max_abs_, compared_);
  }

  Seq NewSeq(int32_t len, int32_t capacity) {
    Seq s;
    s.tokens.resize(len);
    for (int32_t& t : s.tokens) t = static_cast<int32_t>(rng_() % (vocab_ - 2));
    s.pages = pages_.Take((capacity + kPageSize - 1) / kPageSize);
    return s;
  }

  // Forward on both backends; checks every row's logits against the bound above. Fills ref_
  // (the CPU's) and errors_ (each row's).
  void ForwardBoth(const std::vector<BatchRow>& rows) {
    ASSERT_TRUE(cpu_->Forward(rows, &ref_).ok());
    std::vector<float> got;
    const absl::Status st = tp_->Forward(rows, &got);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(got.size(), ref_.size());
    const bool fp16 = GetParam().dtype == DType::kF16;
    errors_.clear();
    for (size_t r = 0; r < ref_.size() / vocab_; ++r) {
      const LogitError e = CompareLogits(&got[r * vocab_], &ref_[r * vocab_], vocab_);
      EXPECT_EQ(e.non_finite, 0);
      EXPECT_LE(e.rel_l2, fp16 ? 0.025 : 0.08) << "row " << r << " max_abs " << e.max_abs;
      EXPECT_LE(e.max_abs, (fp16 ? 0.04 : 0.10) * e.max_ref + 1e-3) << "row " << r;
      worst_rel_l2_ = std::max(worst_rel_l2_, e.rel_l2);
      worst_max_abs_ = std::max(worst_max_abs_, e.max_abs / std::max(e.max_ref, 1e-9));
      errors_.push_back(e);
      ++rows_;
    }
  }

  // Greedy Step() on the TP backend (rewrites the K/V ForwardBoth wrote: idempotent); each token
  // must be the CPU's argmax where the margin is clear of twice that row's logit error.
  void StepGreedy(const std::vector<BatchRow>& rows) {
    std::vector<SampleResult> sampled;
    const absl::Status st = tp_->Step(rows, &sampled, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(sampled.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      float margin = 0;
      const int32_t want = ArgMax(&ref_[i * vocab_], vocab_, &margin);
      if (margin > 2 * errors_[i].max_abs) {
        ++compared_;
        EXPECT_EQ(sampled[i].token_id, want) << "row " << i << " margin " << margin;
      }
    }
  }

  int32_t Next(size_t row) const {
    float margin;
    return ArgMax(&ref_[row * vocab_], vocab_, &margin);
  }

  std::string dir_;
  std::unique_ptr<ModelBackend> cpu_;
  std::unique_ptr<TpCudaBackend> tp_;
  std::vector<float> ref_;
  std::vector<LogitError> errors_;
  int32_t vocab_ = 0;
  std::mt19937 rng_{4321};
  ShuffledPagePool pages_{kPool, 29};
  double worst_rel_l2_ = 0, worst_max_abs_ = 0;
  int64_t rows_ = 0;
  int compared_ = 0;
};

TEST_P(CudaTpQuantTest, PrefillAndDecodeMatchCpu) {
  constexpr int32_t kSeqs = 8, kSteps = 3;
  std::vector<Seq> seqs;
  for (int32_t i = 0; i < kSeqs; ++i) {
    const int32_t len = 5 + 9 * i;
    seqs.push_back(NewSeq(len, len + 3 * kSteps + 1));
  }
  SamplingParams greedy;
  greedy.temperature = 0.f;
  const int32_t half = static_cast<int32_t>(seqs[4].tokens.size()) / 2;
  auto full = [&](int i) {
    return Row(seqs[i], 0, static_cast<int32_t>(seqs[i].tokens.size()), true, &greedy);
  };
  // Prompts 0-3 and the first half of prompt 4; then its second half (reading the first half's
  // pages) and prompts 5-7.
  ForwardBoth({full(0), full(1), full(2), full(3), Row(seqs[4], 0, half, false)});
  StepGreedy({full(0), full(1), full(2), full(3)});
  for (int i = 0; i < 4; ++i) seqs[i].tokens.push_back(Next(i));
  const int32_t len4 = static_cast<int32_t>(seqs[4].tokens.size());
  const std::vector<BatchRow> second = {Row(seqs[4], half, len4, true, &greedy), full(5), full(6),
                                        full(7)};
  ForwardBoth(second);
  StepGreedy(second);
  for (int i = 4; i < 8; ++i) seqs[i].tokens.push_back(Next(i - 4));
  int total = 8;
  for (int32_t batch : {1, 3, 8}) {
    for (int32_t step = 0; step < kSteps; ++step) {
      std::vector<BatchRow> rows;
      for (int32_t i = 0; i < batch; ++i) {
        const int32_t pos = static_cast<int32_t>(seqs[i].tokens.size()) - 1;
        rows.push_back(Row(seqs[i], pos, pos + 1, true, &greedy, step));
      }
      ForwardBoth(rows);
      StepGreedy(rows);
      total += batch;
      for (int32_t i = 0; i < batch; ++i) seqs[i].tokens.push_back(Next(i));
    }
  }
  EXPECT_GE(compared_, total / 2) << "too many steps too close to call";
}

std::vector<TpQuantCase> Cases() {
  std::vector<TpQuantCase> c = {
      {"awq", true, "channel", DType::kF16, KvCacheDtype::kAuto},
      {"gptq", false, "channel", DType::kBF16, KvCacheDtype::kAuto},
      {"fp8", true, "channel", DType::kBF16, KvCacheDtype::kAuto},
      {"fp8", true, "tensor", DType::kBF16, KvCacheDtype::kAuto},
      {"none", true, "channel", DType::kF16, KvCacheDtype::kFp8E4M3},
      {"awq", true, "channel", DType::kBF16, KvCacheDtype::kFp8E4M3},
  };
#if PKV_HAVE_NCCL
  c.push_back({"gptq", true, "channel", DType::kF16, KvCacheDtype::kFp8E4M3, "nccl"});
#endif
  return c;
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaTpQuantTest, ::testing::ValuesIn(Cases()), CaseName);

// A rank reads its packed slices: the quantized twin of a random TP = 2 model reads exactly the
// packed bytes of each rank's projection shapes (4-bit: k / 2 + 4 k / 128 a row; fp8: k + 4)
// instead of 2 k, and runs.
TEST(CudaTpQuantMemory, RankReadsThePackedBytesOfItsSlices) {
  const ModelConfig dense = QuantTestConfig();
  auto d = TpCudaBackend::LoadRandom(dense, 3, TpOptions({0, 0}, KvCacheDtype::kAuto, 64));
  ASSERT_TRUE(d.ok()) << d.status();
  for (const char* method : {"awq", "fp8"}) {
    ModelConfig qc = dense;
    QuantFlags f;
    f.method = method;
    qc.quant = *QuantConfigFromFlags(f);
    auto q = TpCudaBackend::LoadRandom(qc, 3, TpOptions({0, 0}, KvCacheDtype::kAuto, 64));
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ((*d)->rank_weight_read_bytes() - (*q)->rank_weight_read_bytes(),
              testing::PackedBytesSaved(dense, method, 2))
        << method;
    const absl::StatusOr<int32_t> token = testing::GreedyTokenOf(q->get());
    ASSERT_TRUE(token.ok()) << token.status();
    EXPECT_GE(*token, 0);
    EXPECT_LT(*token, dense.vocab_size);
  }
}

// The KV accounting the scheduler and the prefix-cache salt see is the one-GPU backend's (page
// size, KV dtype, activation dtype, the model's shapes); each rank's pool holds its half of every
// page's bytes, one byte an element with FP8; the same memory fraction holds twice the FP8 pages.
TEST(CudaTpFp8Kv, PoolAndIdentityMatchTheOneGpuBackend) {
  const std::string dir = NewDir("pool");
  ASSERT_TRUE(
      testing::WriteQuantModel(dir, QuantTestConfig(), DType::kBF16, FlagsOf({"none"})).ok());
  int64_t fraction_pages[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const KvCacheDtype kv = i == 0 ? KvCacheDtype::kAuto : KvCacheDtype::kFp8E4M3;
    CudaBackendOptions o = TpOptions({0}, kv).backend;
    auto one = CudaModelBackend::Load(dir, o);
    ASSERT_TRUE(one.ok()) << one.status();
    auto tp = TpCudaBackend::Load(dir, TpOptions({0, 0}, kv));
    ASSERT_TRUE(tp.ok()) << tp.status();
    EXPECT_EQ((*tp)->kv_cache_dtype(), kv);
    EXPECT_EQ((*tp)->kv_cache_dtype(), (*one)->kv_cache_dtype());
    EXPECT_EQ((*tp)->page_size(), (*one)->page_size());
    EXPECT_EQ((*tp)->dtype_name(), (*one)->dtype_name());
    EXPECT_EQ((*tp)->num_kv_pages(), (*one)->num_kv_pages());
    EXPECT_EQ((*tp)->config().num_kv_heads, (*one)->config().num_kv_heads);
    EXPECT_EQ((*tp)->config().num_layers, (*one)->config().num_layers);
    const int64_t elem = i == 0 ? 2 : 1;
    const ModelConfig& c = (*one)->config();
    EXPECT_EQ((*one)->kv_bytes_per_token(),
              2 * int64_t{c.num_layers} * c.num_kv_heads * c.head_dim * elem);
    EXPECT_EQ((*tp)->rank_kv_bytes() * 2, kPool * kPageSize * (*one)->kv_bytes_per_token());
    one->reset();
    tp->reset();
    TpCudaOptions t = TpOptions({0, 0}, kv, /*pages=*/0);
    t.backend.kv_memory_fraction = 0.05;
    auto sized = TpCudaBackend::Load(dir, t);  // released before the next load
    ASSERT_TRUE(sized.ok()) << sized.status();
    fraction_pages[i] = (*sized)->num_kv_pages();
  }
  std::printf("[tp fp8 kv] TP 2 pool at 5%% of free memory: %lld pages 16-bit, %lld pages FP8\n",
              static_cast<long long>(fraction_pages[0]), static_cast<long long>(fraction_pages[1]));
  EXPECT_NEAR(static_cast<double>(fraction_pages[1]) / fraction_pages[0], 2.0, 0.05);
}

// A --tp whose o_proj / down_proj columns per rank are not whole 4-bit groups is refused before
// anything loads, as the CPU TP backend refuses it; the same checkpoint runs at TP = 1. An FP8
// slice of an input size the fp8 kernels cannot run (not a multiple of 64) is refused naming the
// field, though the CPU ranks and one GPU run the model.
TEST(CudaTpQuantErrors, RefusesSplitsTheKernelsOrGroupsCannotTake) {
  const std::string awq = NewDir("awq_group256");
  ASSERT_TRUE(
      testing::WriteQuantModel(awq, QuantTestConfig(), DType::kF16, FlagsOf({"awq"}, /*group=*/256))
          .ok());
  const absl::Status cpu = LoadTpCpuBackend(awq, 2, kPageSize, 64).status();
  EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument) << cpu;
  const absl::Status gpu =
      TpCudaBackend::Load(awq, TpOptions({0, 0}, KvCacheDtype::kAuto)).status();
  EXPECT_EQ(gpu.code(), absl::StatusCode::kInvalidArgument) << gpu;
  EXPECT_TRUE(absl::StrContains(gpu.message(), "group boundaries")) << gpu;
  EXPECT_TRUE(absl::StrContains(gpu.message(), "valid --tp for this model: 1")) << gpu;
  EXPECT_TRUE(TpCudaBackend::Load(awq, TpOptions({0}, KvCacheDtype::kAuto)).ok());

  ModelConfig c = QuantTestConfig();
  c.intermediate_size = 320;  // down_proj: 320 inputs on one GPU, 160 a rank at TP = 2
  const std::string fp8 = NewDir("fp8_inter320");
  ASSERT_TRUE(testing::WriteQuantModel(fp8, c, DType::kBF16, FlagsOf({"fp8"})).ok());
  EXPECT_TRUE(LoadTpCpuBackend(fp8, 2, kPageSize, 64).ok());
  EXPECT_TRUE(TpCudaBackend::Load(fp8, TpOptions({0}, KvCacheDtype::kAuto)).ok());
  const absl::Status sliced =
      TpCudaBackend::Load(fp8, TpOptions({0, 0}, KvCacheDtype::kAuto)).status();
  EXPECT_EQ(sliced.code(), absl::StatusCode::kInvalidArgument) << sliced;
  EXPECT_TRUE(absl::StrContains(sliced.message(), "multiple of 64")) << sliced;
  EXPECT_TRUE(absl::StrContains(sliced.message(), "rank")) << sliced;
}

}  // namespace
}  // namespace pkv
