// Tensor parallelism on the CUDA backend (worker/cuda_backend/tp_cuda_backend.h) against the
// one-GPU CudaModelBackend (TP = 1, its reference) loading the same files: TP = 2 and 4 with the
// ranks sharing this GPU (SharedDeviceGroup: eager steps), TP = 1 over NCCL (world size 1: the
// NCCL calls captured in the decode steps' CUDA graphs), and TP = 2 / 4 over NCCL with one rank
// per GPU where the machine has that many GPUs (skipped otherwise). For every step of a prefill, 32
// decode steps of a batch of several rows, a mixed prefill + decode batch and a batch moving
// between graph buckets: logits within 16-bit rounding of TP = 1, and the greedy token of Step()
// equal to TP = 1's wherever TP = 1's top-2 margin exceeds twice the measured logit error. Also:
// seeded sampling on rank 0 equals the host sampler on the gathered logits, bad batches are refused
// like TP = 1 without killing the group, bad device lists and splits are refused.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
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
#include "worker/model/sampler.h"
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
constexpr int32_t kPool = 512;

// H_q 8 / H_kv 4 (TP 1, 2, 4; G = 2), head_dim 64 (decode engine, mma.sync prefill), q/k/v and
// o_proj biases (o_bias replicated, added once), llama3 RoPE scaling, an untied LM head and a
// vocabulary of 1001 that TP 2 and 4 split unevenly (the last rank is short).
ModelConfig WideD64Config() {
  ModelConfig c = testing::DeviceTestConfig("llama-d64");
  c.vocab_size = 1001;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_q_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.attention_bias = true;
  c.o_proj_bias = true;
  c.bos_token_id = c.vocab_size - 2;
  c.eos_token_ids = {c.vocab_size - 1};
  return c;
}

// Qwen3-like: per-head q/k RMSNorm, biases, tied embeddings, head_dim 128 with H_q * D != hidden,
// G = 4, vocabulary 777 (TP 2: 389 + 388 rows).
ModelConfig QkNormD128Config() {
  ModelConfig c = testing::DeviceTestConfig("qwen3-d128");
  c.vocab_size = 777;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.bos_token_id = c.vocab_size - 2;
  c.eos_token_ids = {c.vocab_size - 1};
  return c;
}

struct TpCase {
  std::string model;  // tiny | wide | qknorm
  DType dtype;
  int tp;
  std::string comm;   // shared | nccl
  std::string route;  // the fixed decode route of both backends
};

std::string CaseName(const ::testing::TestParamInfo<TpCase>& info) {
  const TpCase& c = info.param;
  return c.model + "_" + std::string(DTypeName(c.dtype)) + "_tp" + std::to_string(c.tp) + "_" +
         c.comm + "_" + c.route;
}

class CudaTpTest : public ::testing::TestWithParam<TpCase> {
 protected:
  void SetUp() override {
    const TpCase& tc = GetParam();
    dir_ = ::testing::TempDir() + "/pkv_cuda_tp_" + CaseName({tc, 0}) + "_" +
           std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    if (tc.model == "tiny") {  // exactly as pkv-make-model writes it
      RandomModelOptions o;
      o.out_dir = dir_;
      o.config = *ModelShapeConfig("tiny");
      o.dtype = tc.dtype;
      o.seed = 5;
      ASSERT_TRUE(WriteRandomModel(o).ok());
    } else {
      const ModelConfig c = tc.model == "wide" ? WideD64Config() : QkNormD128Config();
      ASSERT_TRUE(testing::WriteScaledModel(dir_, c, tc.dtype, 17, 0.15f).ok());
    }
    CudaBackendOptions o;
    o.page_size = kPageSize;
    o.num_kv_pages = kPool;
    o.max_step_tokens = 1024;
    o.max_rows = 16;
    o.fused_small_batch = false;  // both backends on the cuBLAS path: only TP differs
    o.decode_policy = "fixed:" + tc.route;
    auto ref = CudaModelBackend::Load(dir_, o);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ref_ = *std::move(ref);
    TpCudaOptions t;
    t.backend = o;
    t.communicator = tc.comm;
    if (tc.comm == "shared") {
      t.devices.assign(tc.tp, 0);
    } else {  // NCCL: one rank per GPU; TP > 1 runs where the machine has the GPUs
      int count = 0;
      ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
      if (count < tc.tp) GTEST_SKIP() << "needs " << tc.tp << " GPUs, " << count << " visible";
      for (int r = 0; r < tc.tp; ++r) t.devices.push_back(r);
    }
    auto tp = TpCudaBackend::Load(dir_, t);
    ASSERT_TRUE(tp.ok()) << tp.status();
    tp_ = *std::move(tp);
    ASSERT_EQ(tp_->tp(), tc.tp);
    // NCCL collectives are captured with the step; the shared-device group runs eagerly.
    EXPECT_EQ(tp_->cuda_graphs(), tc.comm == "nccl");
    ASSERT_EQ(tp_->num_kv_pages(), kPool);
    vocab_ = ref_->config().vocab_size;
  }

  Seq NewSeq(int32_t len, int32_t capacity) {
    Seq s;
    s.tokens.resize(len);
    for (int32_t& t : s.tokens) t = static_cast<int32_t>(rng_() % (vocab_ - 2));
    s.pages = pages_.Take((capacity + kPageSize - 1) / kPageSize);
    return s;
  }

  // Forward on both backends; checks the TP logits against TP = 1's and returns the error.
  LogitError ForwardBoth(const std::vector<BatchRow>& rows) {
    absl::Status st = ref_->Forward(rows, &ref_logits_);
    EXPECT_TRUE(st.ok()) << st;
    st = tp_->Forward(rows, &tp_logits_);
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(tp_logits_.size(), ref_logits_.size());
    const int64_t n = std::min(tp_logits_.size(), ref_logits_.size());
    const LogitError e = CompareLogits(tp_logits_.data(), ref_logits_.data(), n);
    // TP rounds each rank's partial o_proj / down output to the 16-bit type before summing (TP = 1
    // rounds the whole sum once) and its GEMMs have other shapes; the bounds are those of the
    // GPU-vs-CPU test (bf16 rounding, ~1.4x headroom). TP = 1 over NCCL only swaps the fused
    // embedding + norm kernel for embed, (identity) all-reduce and add-norm, so it must agree
    // more closely. A wrong shard, head or vocabulary slice gives O(1) errors.
    const bool fp16 = GetParam().dtype == DType::kF16;
    const double tol = GetParam().tp == 1 ? 0.02 : (fp16 ? 0.015 : 0.06);
    EXPECT_EQ(e.non_finite, 0);
    EXPECT_LE(e.rel_l2, tol) << "max_abs " << e.max_abs << " of max " << e.max_ref;
    EXPECT_LE(e.max_abs, 1.4 * tol * e.max_ref + 1e-3) << "rel_l2 " << e.rel_l2;
    return e;
  }

  // Greedy Step() on both backends (the same K/V rewritten: idempotent after ForwardBoth); every
  // row's TP token must equal TP = 1's where TP = 1's Forward margin is clear of twice the logit
  // error plus a floor for what Step's padded graph batches change. Returns the rows compared.
  int StepBothGreedy(const std::vector<BatchRow>& rows, const LogitError& e) {
    std::vector<SampleResult> want, got;
    EXPECT_TRUE(ref_->Step(rows, &want, nullptr).ok());
    absl::Status st = tp_->Step(rows, &got, nullptr);
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(got.size(), want.size());
    int compared = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      float margin = 0;
      ArgMax(&ref_logits_[i * vocab_], vocab_, &margin);
      if (margin > 2 * e.max_abs + 1e-3 * e.max_ref + 1e-5) {
        ++compared;
        EXPECT_EQ(got[i].token_id, want[i].token_id) << "row " << i << " margin " << margin;
      }
    }
    return compared;
  }

  std::string dir_;
  std::unique_ptr<CudaModelBackend> ref_;
  std::unique_ptr<TpCudaBackend> tp_;
  std::vector<float> ref_logits_, tp_logits_;
  int32_t vocab_ = 0;
  std::mt19937 rng_{4321};
  ShuffledPagePool pages_{kPool, 77};
};

// One prefill step of 4 prompts, then 32 decode steps of the 4 rows, teacher-forced with TP = 1's
// greedy tokens so both backends always see the same tokens.
TEST_P(CudaTpTest, PrefillThen32DecodeStepsOfABatch) {
  constexpr int32_t kSteps = 32;
  std::vector<Seq> seqs;
  for (int32_t len : {37, 5, 64, 18}) seqs.push_back(NewSeq(len, len + kSteps + 1));
  SamplingParams greedy;
  greedy.temperature = 0.f;
  std::vector<BatchRow> rows;
  for (const Seq& s : seqs) {
    rows.push_back(Row(s, 0, static_cast<int32_t>(s.tokens.size()), true, &greedy));
  }
  LogitError e = ForwardBoth(rows);
  int compared = StepBothGreedy(rows, e), total = static_cast<int>(rows.size());
  for (int32_t step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      float margin = 0;
      seqs[i].tokens.push_back(ArgMax(&ref_logits_[i * vocab_], vocab_, &margin));
    }
    rows.clear();
    for (const Seq& s : seqs) {
      const int32_t pos = static_cast<int32_t>(s.tokens.size()) - 1;
      rows.push_back(Row(s, pos, pos + 1, true, &greedy, step + 1));
    }
    e = ForwardBoth(rows);
    compared += StepBothGreedy(rows, e);
    total += static_cast<int>(rows.size());
  }
  EXPECT_GE(compared, total / 2) << "too many steps too close to call";
}

// Decode rows, a prefill continuation and a fresh prompt in one step; one row not sampled.
TEST_P(CudaTpTest, MixedPrefillAndDecodeBatch) {
  Seq a = NewSeq(150, 160), b = NewSeq(114, 120), c = NewSeq(17, 17), d = NewSeq(11, 16);
  ForwardBoth({Row(a, 0, 149), Row(b, 0, 64), Row(d, 0, 10)});
  ForwardBoth({Row(a, 149, 150), Row(b, 64, 114), Row(c, 0, 17), Row(d, 10, 11, false)});
  EXPECT_EQ(tp_logits_.size(), 3u * vocab_);
}

// Rows leave the batch (5 -> 3 -> 1) so decode steps move between graph buckets (captured and
// replayed with new lengths and block tables over NCCL).
TEST_P(CudaTpTest, BatchedDecodeAcrossBuckets) {
  std::vector<Seq> seqs;
  for (int32_t len : {5, 40, 90, 17, 120}) seqs.push_back(NewSeq(len, len + 25));
  for (Seq& s : seqs) {
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    ForwardBoth({Row(s, 0, n)});
    float m;
    s.tokens.push_back(ArgMax(ref_logits_.data(), vocab_, &m));
  }
  SamplingParams greedy;
  greedy.temperature = 0.f;
  int compared = 0, total = 0;
  for (int32_t step = 0; step < 24; ++step) {
    const size_t active = step < 8 ? 5 : (step < 16 ? 3 : 1);
    std::vector<BatchRow> rows;
    for (size_t i = 0; i < active; ++i) {
      const int32_t pos = static_cast<int32_t>(seqs[i].tokens.size()) - 1;
      rows.push_back(Row(seqs[i], pos, pos + 1, true, &greedy, step));
    }
    const LogitError e = ForwardBoth(rows);
    compared += StepBothGreedy(rows, e);
    total += static_cast<int>(active);
    for (size_t i = 0; i < active; ++i) {
      float m;
      seqs[i].tokens.push_back(ArgMax(&ref_logits_[i * vocab_], vocab_, &m));
    }
  }
  EXPECT_GE(compared, total / 2);
}

// Seeded sampling with filters and log-probabilities runs on rank 0 over the gathered logits: it
// must equal the host sampler run on the TP backend's own Forward logits.
TEST_P(CudaTpTest, SeededSamplingOnRankZeroMatchesHostSampler) {
  std::vector<Seq> seqs;
  for (int32_t len : {9, 33, 70}) seqs.push_back(NewSeq(len, len + 8));
  std::vector<SamplingParams> params(3);
  params[0].temperature = 0.7f;
  params[0].top_k = 20;
  params[0].seed = rng_();
  params[1].temperature = 1.3f;
  params[1].top_p = 0.8f;
  params[1].seed = rng_();
  params[1].logprobs = true;
  params[1].top_logprobs = 5;
  params[2].temperature = 1.0f;
  params[2].seed = rng_();
  std::vector<BatchRow> rows;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t n = static_cast<int32_t>(seqs[i].tokens.size());
    rows.push_back(Row(seqs[i], 0, n, true, &params[i], static_cast<int32_t>(rng_() % 1000)));
  }
  std::vector<float> logits;
  ASSERT_TRUE(tp_->Forward(rows, &logits).ok());
  std::vector<SampleResult> got;
  ASSERT_TRUE(tp_->Step(rows, &got, nullptr).ok());
  ASSERT_EQ(got.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleResult want;
    ASSERT_TRUE(SampleToken(absl::MakeConstSpan(&logits[i * vocab_], vocab_), params[i],
                            rows[i].sample_index, &want)
                    .ok());
    EXPECT_EQ(got[i].token_id, want.token_id) << "row " << i;
    EXPECT_NEAR(got[i].logprob, want.logprob, 1e-4) << "row " << i;
    ASSERT_EQ(got[i].top.size(), want.top.size());
  }
}

// A bad batch is refused before any rank runs (same message as TP = 1) and the group survives.
TEST_P(CudaTpTest, RefusesBadBatchesAndKeepsWorking) {
  Seq s = NewSeq(20, 20);
  s.tokens[3] = vocab_;  // outside the vocabulary (and every rank's slice)
  std::vector<float> logits;
  const BatchRow bad = Row(s, 0, 20);
  const absl::Status ref = ref_->Forward({&bad, 1}, &logits);
  const absl::Status got = tp_->Forward({&bad, 1}, &logits);
  EXPECT_EQ(got.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.message(), ref.message());
  s.tokens[3] = 1;
  ForwardBoth({Row(s, 0, 20)});
}

std::vector<TpCase> Cases() {
  std::vector<TpCase> c = {
      {"tiny", DType::kBF16, 2, "shared", "workqueue"},
      {"wide", DType::kBF16, 2, "shared", "workqueue"},
      {"wide", DType::kBF16, 4, "shared", "split"},
      {"qknorm", DType::kF16, 2, "shared", "workqueue"},
  };
#if PKV_HAVE_NCCL
  c.push_back({"tiny", DType::kBF16, 1, "nccl", "workqueue"});
  c.push_back({"wide", DType::kBF16, 1, "nccl", "workqueue"});
  // One rank per GPU; skipped on machines with fewer GPUs.
  c.push_back({"tiny", DType::kBF16, 2, "nccl", "workqueue"});
  c.push_back({"wide", DType::kBF16, 2, "nccl", "workqueue"});
  c.push_back({"wide", DType::kBF16, 4, "nccl", "split"});
  c.push_back({"qknorm", DType::kF16, 2, "nccl", "workqueue"});
#endif
  return c;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTpTest, ::testing::ValuesIn(Cases()), CaseName);

TEST(TpCudaBackendConfig, RefusesSplitsDevicesAndCommunicatorsThatCannotWork) {
  const std::string dir = ::testing::TempDir() + "/pkv_cuda_tp_config";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(testing::WriteScaledModel(dir, WideD64Config(), DType::kBF16, 3, 0.1f).ok());
  TpCudaOptions o;
  o.backend.num_kv_pages = 64;
  o.backend.decode_policy = "fixed:workqueue";
  o.devices = {0, 0, 0};  // 3 does not divide 4 KV heads
  absl::Status st = TpCudaBackend::Load(dir, o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "valid --tp for this model: 1, 2, 4")) << st;
  o.devices = {0, 4096};  // no such GPU
  EXPECT_EQ(TpCudaBackend::Load(dir, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.devices = {0, 0};
  o.communicator = "nccl";  // NCCL refuses two ranks on one device
  st = TpCudaBackend::Load(dir, o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  o.communicator = "carrier-pigeon";
  EXPECT_EQ(TpCudaBackend::Load(dir, o).status().code(), absl::StatusCode::kInvalidArgument);
  // Each rank holds about half the weights: the embedding, LM head and projections are split.
  o.communicator = "shared";
  auto two = TpCudaBackend::Load(dir, o);
  ASSERT_TRUE(two.ok()) << two.status();
  o.devices = {0};
  auto one = TpCudaBackend::Load(dir, o);
  ASSERT_TRUE(one.ok()) << one.status();
  const double ratio =
      static_cast<double>((*two)->rank_weight_bytes()) / (*one)->rank_weight_bytes();
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.6);  // norms and the o_proj bias are replicated
}

}  // namespace
}  // namespace pkv
