// The CUDA backend's deterministic mode (CudaBackendOptions::deterministic): four sequences give
// bitwise the same logits (Forward, eager) and the same greedy and seeded tokens and
// log-probabilities (Step: CUDA graphs per batch bucket) alone, together, with prefill chunks
// (one of a single token) mixed into decode steps, and after their history is recomputed by one
// prefill chunk (tests/unit/model/batch_invariance.h). The default mode is run through the same
// mixes and its differences are printed as an observation, not asserted: the issue's "2 of 4
// prompts change their greedy continuation" is about real model sizes, and small test models may
// or may not show it.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/device/model_test_util.h"
#include "tests/unit/model/batch_invariance.h"
#include "worker/cuda_backend/cuda_backend.h"

namespace pkv::testing {
namespace {

constexpr int32_t kPageSize = 16;
constexpr int32_t kPool = 1024;
constexpr int32_t kSteps = 10;

struct Case {
  std::string model;  // "tiny" (head_dim 16: the generic kernel) or a DeviceTestConfig name
  DType dtype;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.model + "_" + std::string(DTypeName(info.param.dtype));
  for (char& c : n) c = c == '-' ? '_' : c;
  return n;
}

class DeterminismTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    dir_ = ::testing::TempDir() + "/pkv_determinism_" + CaseName({c, 0});
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(WriteNamedTestModel(dir_, c.model, c.dtype).ok());
    CudaBackendOptions o;
    o.page_size = kPageSize;
    o.num_kv_pages = kPool;
    o.max_step_tokens = 2048;  // the together mix feeds all four prompts in one step
    o.max_rows = 16;
    o.deterministic = true;
    auto gpu = CudaModelBackend::Load(dir_, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *std::move(gpu);
    ASSERT_TRUE(gpu_->deterministic());
    // Prompts long enough for the decode engine to split them in the default mode, and one
    // (sequence 3) long enough for the chunked mix's 64, 1, 2, 7-token chunks.
    std::mt19937 rng(21);
    ShuffledPagePool pool(kPool, 5);
    const int32_t vocab = gpu_->config().vocab_size;
    for (int32_t len : {300, 611, 45, 170}) {
      InvarianceSeq s;
      for (int32_t i = 0; i < len; ++i) s.prompt.push_back(static_cast<int32_t>(rng() % vocab));
      s.pages = pool.Take((len + kSteps + kPageSize - 1) / kPageSize);
      seqs_.push_back(std::move(s));
    }
  }

  // Runs every mix; returns how many (mix, sequence) pairs differ from the sequence alone, and
  // prints each difference.
  int CountDifferences(const InvarianceOptions& o, const char* mode) {
    absl::StatusOr<SeqRecords> alone = RunMix(gpu_.get(), seqs_, MixKind::kAlone, o);
    EXPECT_TRUE(alone.ok()) << alone.status();
    if (!alone.ok()) return -1;
    int differ = 0;
    for (MixKind kind : {MixKind::kTogether, MixKind::kChunked, MixKind::kRecompute}) {
      absl::StatusOr<SeqRecords> got = RunMix(gpu_.get(), seqs_, kind, o);
      EXPECT_TRUE(got.ok()) << MixName(kind) << ": " << got.status();
      if (!got.ok()) return -1;
      for (size_t i = 0; i < seqs_.size(); ++i) {
        EXPECT_EQ((*alone)[i].size(), static_cast<size_t>(kSteps));
        std::string what;
        const int32_t k = FirstDifference((*alone)[i], (*got)[i], &what);
        if (k < 0) continue;
        ++differ;
        std::printf("%s %s: %s, sequence %zu differs from alone at step %d: %s\n", mode,
                    o.use_forward ? "forward" : "step", MixName(kind), i, k, what.c_str());
      }
    }
    return differ;
  }

  std::vector<InvarianceOptions> Modes() const {
    std::vector<InvarianceOptions> modes(3);
    for (InvarianceOptions& o : modes) o.steps = kSteps;
    modes[0].use_forward = true;   // bitwise logits
    modes[1].use_forward = false;  // greedy tokens and log-probabilities, graph replay
    modes[1].params.temperature = 0.f;
    modes[1].params.logprobs = true;
    modes[1].params.top_logprobs = 5;
    modes[2] = modes[1];  // seeded sampling
    modes[2].params.temperature = 0.9f;
    modes[2].params.top_p = 0.95f;
    modes[2].params.seed = 77;
    return modes;
  }

  std::string dir_;
  std::unique_ptr<CudaModelBackend> gpu_;
  std::vector<InvarianceSeq> seqs_;
};

TEST_P(DeterminismTest, EveryRowIsIndependentOfItsBatch) {
  for (const InvarianceOptions& o : Modes()) {
    EXPECT_EQ(CountDifferences(o, "deterministic"), 0);
  }
}

// The same with the faster parts (DeterministicForm), each alone and together: split tiles
// (prompts of 300 and 611 tokens give decode rows of 2-3 splits at C = 256, the chunked mix cuts
// prefill runs at split edges, graph steps run the fixed 16-tiles-a-row layout) and pinned GEMMs
// (one algorithm at every token count: the together and recompute mixes' prompts are one GEMM of
// hundreds of rows, a decode step one of a few).
TEST_P(DeterminismTest, TheFasterFormsAreAlsoIndependentOfTheBatch) {
  for (const DeterministicForm form :
       {DeterministicForm{true, false}, DeterministicForm{false, true},
        DeterministicForm{true, true}}) {
    ASSERT_TRUE(gpu_->SetDeterministic(true, form).ok());
    const std::string mode = std::string("deterministic") +
                             (form.split_tiles ? ", split tiles" : "") +
                             (form.pinned_gemm ? ", pinned GEMMs" : "");
    for (const InvarianceOptions& o : Modes()) EXPECT_EQ(CountDifferences(o, mode.c_str()), 0);
  }
}

// An observation for the record: the default mode through the same mixes (not asserted).
TEST_P(DeterminismTest, DefaultModeObservation) {
  ASSERT_TRUE(gpu_->SetDeterministic(false).ok());
  int total = 0;
  for (const InvarianceOptions& o : Modes()) total += std::max(0, CountDifferences(o, "default"));
  std::printf("observation: default mode, %s: %d of %zu (mode, mix, sequence) triples differ\n",
              CaseName({GetParam(), 0}).c_str(), total, 3 * 3 * seqs_.size());
  // Switching back restores the invariance (a run-time toggle, as the benchmark uses it).
  ASSERT_TRUE(gpu_->SetDeterministic(true).ok());
  EXPECT_EQ(CountDifferences(Modes()[1], "deterministic again"), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, DeterminismTest,
                         ::testing::Values(Case{"llama-d64", DType::kBF16},
                                           Case{"qwen3-d128", DType::kBF16},
                                           Case{"qwen2-d64", DType::kF16},
                                           Case{"tiny", DType::kBF16}),
                         CaseName);

}  // namespace
}  // namespace pkv::testing
