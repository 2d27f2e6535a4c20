// The CPU backend is batch-invariant by construction (every projection is a per-token dot product
// in a fixed order, attention runs per query over its own row, sampling is keyed per row): the
// same sequences give bitwise the same logits and tokens alone, together, with prefill chunks
// mixed into decode steps and after a recompute of their history (tests/unit/model/
// batch_invariance.h). The CUDA backend's deterministic mode is held to the same check on the
// GPU (tests/device/determinism_test.cc).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/model/batch_invariance.h"
#include "tests/unit/model/test_model.h"
#include "worker/model/cpu_backend.h"

namespace pkv::testing {
namespace {

constexpr int32_t kPageSize = 16;

std::vector<InvarianceSeq> MakeSeqs(int32_t vocab, int32_t steps) {
  std::mt19937 rng(5);
  std::vector<InvarianceSeq> seqs;
  int32_t next_page = 0;
  for (int32_t len : {90, 130, 41, 110}) {
    InvarianceSeq s;
    for (int32_t i = 0; i < len; ++i) s.prompt.push_back(static_cast<int32_t>(rng() % vocab));
    const int32_t pages = (len + steps + kPageSize - 1) / kPageSize;
    for (int32_t p = 0; p < pages; ++p) s.pages.push_back(next_page + pages - 1 - p);  // reversed
    next_page += pages;
    seqs.push_back(std::move(s));
  }
  return seqs;
}

void ExpectInvariant(ModelBackend* backend, const InvarianceOptions& o) {
  const std::vector<InvarianceSeq> seqs = MakeSeqs(backend->config().vocab_size, o.steps);
  absl::StatusOr<SeqRecords> alone = RunMix(backend, seqs, MixKind::kAlone, o);
  ASSERT_TRUE(alone.ok()) << alone.status();
  for (MixKind kind : {MixKind::kTogether, MixKind::kChunked, MixKind::kRecompute}) {
    absl::StatusOr<SeqRecords> got = RunMix(backend, seqs, kind, o);
    ASSERT_TRUE(got.ok()) << MixName(kind) << ": " << got.status();
    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_EQ((*alone)[i].size(), static_cast<size_t>(o.steps));
      std::string what;
      EXPECT_EQ(FirstDifference((*alone)[i], (*got)[i], &what), -1)
          << MixName(kind) << ", sequence " << i << ": " << what;
    }
  }
}

class CpuBatchInvarianceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuBatchInvarianceTest, LogitsAndTokensDoNotDependOnTheBatch) {
  const ModelConfig config = TinyConfig(GetParam());
  auto backend = CpuModelBackend::Create(RandomWeights(config, 3), kPageSize, 256);
  ASSERT_TRUE(backend.ok()) << backend.status();
  InvarianceOptions o;
  o.steps = 8;
  o.use_forward = true;
  ExpectInvariant(backend->get(), o);
  o.use_forward = false;  // greedy, with log-probabilities
  o.params.temperature = 0.f;
  o.params.logprobs = true;
  o.params.top_logprobs = 3;
  ExpectInvariant(backend->get(), o);
  o.params.temperature = 0.8f;  // seeded sampling
  o.params.top_p = 0.9f;
  o.params.seed = 1234;
  ExpectInvariant(backend->get(), o);
}

// The comparison the tests rely on sees a single flipped bit, a token, a log-probability.
TEST(FirstDifferenceTest, SeesEveryKindOfDifference) {
  std::vector<Record> ref(3);
  for (Record& r : ref) r.logits = {1.f, 2.f, 3.f};
  std::string what;
  EXPECT_EQ(FirstDifference(ref, ref, &what), -1);
  std::vector<Record> got = ref;
  got[1].logits[2] = std::nextafter(3.f, 4.f);
  EXPECT_EQ(FirstDifference(ref, got, &what), 1) << what;
  got = ref;
  got[2].token = 5;
  EXPECT_EQ(FirstDifference(ref, got, &what), 2) << what;
  got = ref;
  got[0].logprob = -0.f;
  EXPECT_EQ(FirstDifference(ref, got, &what), 0) << what;
  got.pop_back();
  EXPECT_EQ(FirstDifference(ref, got, &what), 0);
}

INSTANTIATE_TEST_SUITE_P(Families, CpuBatchInvarianceTest,
                         ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
}  // namespace pkv::testing
