// The CUDA backend with an FP8 KV cache (CudaBackendOptions::kv_cache_dtype) on small random
// models, three backends loading the same files side by side:
//  - FP8 pages, tensor-core attention vs FP8 pages, generic attention: both read the very same
//    codes (written by the same RoPE+KV kernel), so they differ only by attention arithmetic:
//    the 16-bit test's tight bounds (cuda_backend_test.cc);
//  - FP8 pages vs 16-bit pages (kv_cache_dtype auto): the quantization drift, bounded loosely and
//    printed (log-probability drift of the 16-bit backend's top token, KL(16-bit || FP8));
//  - the pool: the same memory fraction holds twice the pages.
// Prefill chunks read earlier chunks' FP8 pages, 1-token rows go through the decode engine, a
// mixed batch through both. Label: device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/device/model_test_util.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/random_model.h"

namespace pkv {
namespace {

using ::pkv::testing::ArgMax;
using ::pkv::testing::CompareLogits;
using ::pkv::testing::LogitError;
using ::pkv::testing::Row;
using ::pkv::testing::Seq;
using ::pkv::testing::ShuffledPagePool;

constexpr int32_t kPageSize = 16;
constexpr int32_t kPool = 256;

struct Fp8Case {
  std::string name;  // "tiny" (pkv-make-model, head_dim 16: generic attention) or a test shape
  DType dtype;
  KvCacheDtype kv;
  bool fused;
};

std::string Fp8CaseName(const ::testing::TestParamInfo<Fp8Case>& i) {
  std::string n = i.param.name + "_" + std::string(DTypeName(i.param.dtype)) + "_" +
                  KvCacheDtypeName(i.param.kv) + (i.param.fused ? "_fused" : "");
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// Drift of one row's distribution: |log p_fp8(t) - log p_16(t)| at the 16-bit top token t and
// KL(p_16 || p_fp8), natural log.
struct Drift {
  double top_logprob = 0;
  double kl = 0;
};
Drift RowDrift(const float* ref, const float* got, int32_t n) {
  const double mr = *std::max_element(ref, ref + n), mg = *std::max_element(got, got + n);
  double zr = 0, zg = 0;
  for (int32_t i = 0; i < n; ++i) {
    zr += std::exp(ref[i] - mr);
    zg += std::exp(got[i] - mg);
  }
  const double lzr = mr + std::log(zr), lzg = mg + std::log(zg);
  Drift d;
  float margin;
  const int32_t top = ArgMax(ref, n, &margin);
  d.top_logprob = std::abs((got[top] - lzg) - (ref[top] - lzr));
  for (int32_t i = 0; i < n; ++i) {
    const double lr = ref[i] - lzr, lg = got[i] - lzg;
    d.kl += std::exp(lr) * (lr - lg);
  }
  return d;
}

class CudaBackendFp8Test : public ::testing::TestWithParam<Fp8Case> {
 protected:
  void SetUp() override {
    const Fp8Case& c = GetParam();
    dir_ = ::testing::TempDir() + "/pkv_cuda_fp8_" + Fp8CaseName({c, 0});
    std::filesystem::create_directories(dir_);
    if (c.name == "tiny") {
      RandomModelOptions o;
      o.out_dir = dir_;
      o.config = *ModelShapeConfig("tiny");
      o.dtype = c.dtype;
      o.seed = 7;
      ASSERT_TRUE(WriteRandomModel(o).ok());
    } else {
      ASSERT_TRUE(testing::WriteScaledModel(dir_, testing::DeviceTestConfig(c.name), c.dtype, 11,
                                            testing::DeviceTestScale(c.name))
                      .ok());
    }
    base16_ = LoadBackend(KvCacheDtype::kAuto, "auto");
    fp8_ = LoadBackend(c.kv, "auto");
    fp8_generic_ = LoadBackend(c.kv, "generic");
    ASSERT_TRUE(base16_ && fp8_ && fp8_generic_);
    vocab_ = base16_->config().vocab_size;
  }

  std::unique_ptr<CudaModelBackend> LoadBackend(KvCacheDtype kv, const std::string& attention) {
    CudaBackendOptions o;
    o.page_size = kPageSize;
    o.num_kv_pages = kPool;
    o.max_step_tokens = 512;
    o.max_rows = 16;
    o.attention = attention;
    o.fused_small_batch = GetParam().fused;
    o.kv_cache_dtype = kv;
    auto b = CudaModelBackend::Load(dir_, o);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  Seq NewSeq(int32_t len, int32_t capacity) {
    Seq s;
    s.tokens.resize(len);
    for (int32_t& t : s.tokens) t = static_cast<int32_t>(rng_() % (vocab_ - 2));
    s.pages = pages_.Take((capacity + kPageSize - 1) / kPageSize);
    return s;
  }

  // Runs the rows on the three backends, checks the bounds, returns the 16-bit logits.
  std::vector<float> ForwardAll(const std::vector<BatchRow>& rows) {
    std::vector<float> l16, l8, l8g;
    for (auto [b, out] : {std::pair{base16_.get(), &l16}, std::pair{fp8_.get(), &l8},
                          std::pair{fp8_generic_.get(), &l8g}}) {
      const absl::Status st = b->Forward(rows, out);
      EXPECT_TRUE(st.ok()) << st;
    }
    EXPECT_EQ(l8.size(), l16.size());
    EXPECT_EQ(l8g.size(), l16.size());
    if (l8.size() != l16.size() || l8g.size() != l16.size()) return l16;
    // Same codes, different attention kernels: the tensor-core kernel rounds P to the 16-bit
    // dtype before P.V, the generic one keeps fp32, as in cuda_backend_test's GPU-vs-CPU bounds
    // (0.015 fp16, 0.06 bf16). FP8 keys sharpen this random model's already peaky attention, which
    // amplifies that rounding: llama-d64 fp16 E5M2 measured 0.0161 on the H200 (bf16 E4M3 0.028),
    // so fp16 gets 0.025 here.
    const bool fp16 = GetParam().dtype == DType::kF16;
    const LogitError same = CompareLogits(l8.data(), l8g.data(), static_cast<int64_t>(l8.size()));
    EXPECT_EQ(same.non_finite, 0);
    EXPECT_LE(same.rel_l2, fp16 ? 0.025 : 0.06) << "tensor-core vs generic over FP8 pages";
    worst_same_ = std::max(worst_same_, same.rel_l2);
    // FP8 vs 16-bit pages: the quantization drift (bounds below, measured figures printed).
    const LogitError q = CompareLogits(l8.data(), l16.data(), static_cast<int64_t>(l8.size()));
    EXPECT_EQ(q.non_finite, 0);
    worst_rel_l2_ = std::max(worst_rel_l2_, q.rel_l2);
    for (size_t r = 0; r * vocab_ < l16.size(); ++r) {
      const Drift d = RowDrift(&l16[r * vocab_], &l8[r * vocab_], vocab_);
      worst_.top_logprob = std::max(worst_.top_logprob, d.top_logprob);
      worst_.kl = std::max(worst_.kl, d.kl);
      sum_kl_ += d.kl;
      ++rows_;
    }
    return l16;
  }

  void TearDown() override {
    if (rows_ == 0) return;
    std::printf(
        "[fp8 backend] %s: %lld rows; FP8 vs 16-bit KV: logits rel_l2 max %.4f, top-token "
        "logprob drift max %.4f, KL max %.5f mean %.5f; tensor-core vs generic over FP8: rel_l2 "
        "max %.4f\n",
        Fp8CaseName({GetParam(), 0}).c_str(), static_cast<long long>(rows_), worst_rel_l2_,
        worst_.top_logprob, worst_.kl, sum_kl_ / rows_, worst_same_);
    // The drift bounds. These 0.15-scale models have very peaky attention (score std ~6), so a
    // K element's FP8 rounding (2^-4 relative for E4M3, 2^-3 for E5M2) moves scores by tenths:
    // measured on the H200 (2026-12-02, both tests): E4M3 logits rel_l2 up to 0.28 (llama-d64)
    // and 0.06 (qwen3-d128, q/k-normed), top-token logprob drift up to 1.94, per-row KL mean up
    // to 0.15; E5M2 rel_l2 0.54, drift 2.23, KL mean 0.34; the 0.02-scale tiny model 0.011 and
    // KL ~0. Bounds ~1.5x the measured; a wrong scale, page or conversion decorrelates the
    // logits (rel_l2 >= 1). The tight checks are the FP8 kernels against the FP8 CPU reference
    // (prefill_fp8_test, decode_fp8_test) and tensor-core vs generic above.
    const bool e5 = GetParam().kv == KvCacheDtype::kFp8E5M2;
    EXPECT_LE(worst_rel_l2_, e5 ? 0.8 : 0.42);
    EXPECT_LE(worst_.top_logprob, e5 ? 3.4 : 3.0);
    EXPECT_LE(sum_kl_ / rows_, e5 ? 0.5 : 0.23);
  }

  std::string dir_;
  std::unique_ptr<CudaModelBackend> base16_, fp8_, fp8_generic_;
  int32_t vocab_ = 0;
  std::mt19937 rng_{4321};
  ShuffledPagePool pages_{kPool, 17};
  Drift worst_;
  double worst_rel_l2_ = 0, worst_same_ = 0, sum_kl_ = 0;
  int64_t rows_ = 0;
};

TEST_P(CudaBackendFp8Test, ChunkedPrefillThenDecode) {
  Seq s = NewSeq(150, 150 + 24);
  int32_t pos = 0;
  std::vector<float> ref;
  for (int32_t n : {40, 70, 1, 39}) {  // later chunks read the earlier chunks' FP8 pages
    ref = ForwardAll({Row(s, pos, pos + n)});
    pos += n;
  }
  for (int32_t step = 0; step < 24; ++step) {  // teacher-forced by the 16-bit backend's argmax
    float margin;
    s.tokens.push_back(ArgMax(ref.data(), vocab_, &margin));
    ref = ForwardAll({Row(s, pos, pos + 1)});
    ++pos;
  }
}

TEST_P(CudaBackendFp8Test, MixedBatch) {
  Seq a = NewSeq(150, 160), b = NewSeq(114, 120), c = NewSeq(17, 17), d = NewSeq(11, 16);
  ForwardAll({Row(a, 0, 149), Row(b, 0, 64), Row(d, 0, 10)});
  ForwardAll({Row(a, 149, 150), Row(b, 64, 114), Row(c, 0, 17), Row(d, 10, 11, false)});
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaBackendFp8Test,
    ::testing::Values(Fp8Case{"tiny", DType::kBF16, KvCacheDtype::kFp8E4M3, false},
                      Fp8Case{"llama-d64", DType::kBF16, KvCacheDtype::kFp8E4M3, true},
                      Fp8Case{"llama-d64", DType::kF16, KvCacheDtype::kFp8E5M2, false},
                      Fp8Case{"qwen3-d128", DType::kBF16, KvCacheDtype::kFp8E4M3, false}),
    Fp8CaseName);

// Sizing from free memory: FP8 pages are half the bytes, so the same fraction of the same free
// memory holds twice as many.
TEST(CudaBackendFp8PoolTest, SameMemoryHoldsTwiceThePages) {
  const std::string dir = ::testing::TempDir() + "/pkv_cuda_fp8_pool";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(testing::WriteScaledModel(dir, testing::DeviceTestConfig("llama-d64"), DType::kBF16,
                                        11, 0.15f)
                  .ok());
  int64_t pages[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    CudaBackendOptions o;
    o.kv_memory_fraction = 0.05;
    o.max_step_tokens = 512;
    o.max_rows = 16;
    o.kv_cache_dtype = i == 0 ? KvCacheDtype::kAuto : KvCacheDtype::kFp8E4M3;
    auto b = CudaModelBackend::Load(dir, o);  // released before the next load
    ASSERT_TRUE(b.ok()) << b.status();
    pages[i] = (*b)->num_kv_pages();
  }
  std::printf("[fp8 backend] pool at 5%% of free memory: %lld pages 16-bit, %lld pages FP8\n",
              static_cast<long long>(pages[0]), static_cast<long long>(pages[1]));
  EXPECT_NEAR(static_cast<double>(pages[1]) / pages[0], 2.0, 0.05);
}

}  // namespace
}  // namespace pkv
