#include "worker/model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/harness/test_seed.h"
#include "tests/unit/model/test_model.h"

namespace pkv {
namespace {

using ::pkv::testing::DenseForward;
using ::pkv::testing::RandomWeights;
using ::pkv::testing::TinyConfig;

constexpr int32_t kPageSize = 4;
constexpr int64_t kNumPages = 64;

// One sequence: its tokens and its block table.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
};

BatchRow Row(const Seq& s, int32_t begin, int32_t end, bool sample = true) {
  BatchRow r;
  r.tokens = s.tokens.data() + begin;
  r.num_tokens = end - begin;
  r.start_pos = begin;
  r.pages = s.pages.data();
  r.num_pages = static_cast<int32_t>(s.pages.size());
  r.sample = sample;
  return r;
}

std::vector<int32_t> RandomTokens(int n, int vocab, std::mt19937* rng) {
  std::vector<int32_t> t(n);
  for (int32_t& v : t) v = static_cast<int32_t>((*rng)() % vocab);
  return t;
}

std::vector<int32_t> ContiguousPages(int n) {
  std::vector<int32_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

std::unique_ptr<CpuModelBackend> MakeBackend(const ModelConfig& c, uint32_t seed) {
  auto b = CpuModelBackend::Create(RandomWeights(c, seed), kPageSize, kNumPages);
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

// Feeds `seq` in chunks of the given sizes (the last chunk samples) and returns the final logits.
std::vector<float> RunChunks(CpuModelBackend* b, const Seq& seq, const std::vector<int>& chunks) {
  std::vector<float> logits;
  int32_t pos = 0;
  for (int n : chunks) {
    const BatchRow row = Row(seq, pos, pos + n);
    absl::Status st = b->Forward({&row, 1}, &logits);
    EXPECT_TRUE(st.ok()) << st;
    pos += n;
  }
  EXPECT_EQ(pos, static_cast<int32_t>(seq.tokens.size()));
  return logits;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

class CpuBackendFamilyTest : public ::testing::TestWithParam<std::string> {};

// (a) The paged float32 backend equals a dense double-precision model at every position.
TEST_P(CpuBackendFamilyTest, MatchesDenseReference) {
  const ModelConfig c = TinyConfig(GetParam());
  const uint32_t seed = ::pkv::testing::TestSeed();
  std::mt19937 rng(seed);
  const LlamaWeights weights = RandomWeights(c, seed);
  auto backend = CpuModelBackend::Create(weights, kPageSize, kNumPages);
  ASSERT_TRUE(backend.ok()) << backend.status();
  Seq seq{RandomTokens(29, c.vocab_size, &rng), {}};
  std::vector<int32_t> perm(kNumPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  seq.pages.assign(perm.begin(), perm.begin() + 8);
  const auto dense = DenseForward(weights, seq.tokens);
  // Prefill 17, then decode one token at a time, checking every position's logits.
  std::vector<float> logits;
  const BatchRow prefill = Row(seq, 0, 17);
  ASSERT_TRUE((*backend)->Forward({&prefill, 1}, &logits).ok());
  for (int32_t pos = 16; pos < 29; ++pos) {
    if (pos > 16) {
      const BatchRow step = Row(seq, pos, pos + 1);
      ASSERT_TRUE((*backend)->Forward({&step, 1}, &logits).ok());
    }
    ASSERT_EQ(logits.size(), static_cast<size_t>(c.vocab_size));
    double scale = 0;
    for (double v : dense[pos]) scale = std::max(scale, std::abs(v));
    ASSERT_GT(scale, 0.1);  // logits are not trivially small
    for (int v = 0; v < c.vocab_size; ++v) {
      ASSERT_NEAR(logits[v], dense[pos][v], 1e-4 * (1 + scale)) << "pos " << pos << " token " << v;
    }
  }
}

// (b) One chunk, uneven chunks and token-by-token decode give the same final logits.
TEST_P(CpuBackendFamilyTest, ChunkingDoesNotChangeLogits) {
  const ModelConfig c = TinyConfig(GetParam());
  const uint32_t seed = ::pkv::testing::TestSeed() + 1;
  std::mt19937 rng(seed);
  Seq seq{RandomTokens(31, c.vocab_size, &rng), ContiguousPages(8)};
  auto one = MakeBackend(c, seed);
  auto uneven = MakeBackend(c, seed);
  auto decode = MakeBackend(c, seed);
  const std::vector<float> a = RunChunks(one.get(), seq, {31});
  const std::vector<float> b = RunChunks(uneven.get(), seq, {5, 1, 13, 3, 4, 5});
  const std::vector<float> d = RunChunks(decode.get(), seq, std::vector<int>(31, 1));
  EXPECT_LE(MaxAbsDiff(a, b), 1e-5);
  EXPECT_LE(MaxAbsDiff(a, d), 1e-5);
}

// (c) Which physical pages hold the sequence does not matter.
TEST_P(CpuBackendFamilyTest, PageIdsDoNotChangeLogits) {
  const ModelConfig c = TinyConfig(GetParam());
  const uint32_t seed = ::pkv::testing::TestSeed() + 2;
  std::mt19937 rng(seed);
  Seq ordered{RandomTokens(23, c.vocab_size, &rng), ContiguousPages(6)};
  Seq shuffled = ordered;
  std::vector<int32_t> perm(kNumPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  shuffled.pages.assign(perm.begin(), perm.begin() + 6);
  auto a = MakeBackend(c, seed);
  auto b = MakeBackend(c, seed);
  EXPECT_LE(MaxAbsDiff(RunChunks(a.get(), ordered, {9, 14}), RunChunks(b.get(), shuffled, {9, 14})),
            1e-6);
}

// (d) A mixed batch (prefill from scratch, chunked prefill, decode, one-token prompt) equals each
// row run alone.
TEST_P(CpuBackendFamilyTest, BatchEqualsRowsAlone) {
  const ModelConfig c = TinyConfig(GetParam());
  const uint32_t seed = ::pkv::testing::TestSeed() + 3;
  std::mt19937 rng(seed);
  struct Plan {
    int history;  // tokens already cached before the batched step
    int fed;      // tokens fed in the batched step
  };
  const std::vector<Plan> plans = {{0, 11}, {9, 1}, {7, 6}, {0, 1}, {16, 1}};
  std::vector<int32_t> perm(kNumPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<Seq> seqs;
  for (size_t i = 0; i < plans.size(); ++i) {
    Seq s{RandomTokens(plans[i].history + plans[i].fed, c.vocab_size, &rng), {}};
    s.pages.assign(perm.begin() + 6 * i, perm.begin() + 6 * (i + 1));  // disjoint page sets
    seqs.push_back(std::move(s));
  }
  auto batched = MakeBackend(c, seed);
  std::vector<BatchRow> rows;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].history > 0)
      RunChunks(
          batched.get(),
          Seq{{seqs[i].tokens.begin(), seqs[i].tokens.begin() + plans[i].history}, seqs[i].pages},
          {plans[i].history});
    rows.push_back(Row(seqs[i], plans[i].history, plans[i].history + plans[i].fed));
  }
  rows[2].sample = false;  // a prefill chunk that does not sample yet
  std::vector<float> batch_logits;
  ASSERT_TRUE(batched->Forward(rows, &batch_logits).ok());
  ASSERT_EQ(batch_logits.size(), static_cast<size_t>((plans.size() - 1) * c.vocab_size));
  size_t sampled = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (!rows[i].sample) continue;
    auto alone = MakeBackend(c, seed);
    std::vector<int> chunks;
    if (plans[i].history > 0) chunks.push_back(plans[i].history);
    chunks.push_back(plans[i].fed);
    const std::vector<float> want = RunChunks(alone.get(), seqs[i], chunks);
    const std::vector<float> got(batch_logits.begin() + sampled * c.vocab_size,
                                 batch_logits.begin() + (sampled + 1) * c.vocab_size);
    EXPECT_LE(MaxAbsDiff(got, want), 1e-5) << "row " << i;
    ++sampled;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CpuBackendFamilyTest,
                         ::testing::Values("llama", "llama3", "qwen2", "qwen3"));

TEST(CpuBackendTest, GreedyStepSamplesArgmaxAndReportsStats) {
  const ModelConfig c = TinyConfig("llama");
  std::mt19937 rng(5);
  Seq a{RandomTokens(10, c.vocab_size, &rng), {3, 9, 1}};
  Seq b{RandomTokens(6, c.vocab_size, &rng), {7, 2}};
  auto fwd = MakeBackend(c, 5);
  auto step = MakeBackend(c, 5);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = true;
  std::vector<BatchRow> rows = {Row(a, 0, 10), Row(b, 0, 6)};
  for (BatchRow& r : rows) r.params = &greedy;
  std::vector<float> logits;
  ASSERT_TRUE(fwd->Forward(rows, &logits).ok());
  std::vector<SampleResult> samples;
  StepStats stats;
  ASSERT_TRUE(step->Step(rows, &samples, &stats).ok());
  ASSERT_EQ(samples.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    auto begin = logits.begin() + i * c.vocab_size;
    const int argmax = static_cast<int>(std::max_element(begin, begin + c.vocab_size) - begin);
    EXPECT_EQ(samples[i].token_id, argmax);
    EXPECT_LE(samples[i].logprob, 0.0f);
  }
  EXPECT_EQ(stats.decode_route, "cpu-reference");
  EXPECT_EQ(stats.decode_launches, 0);
  EXPECT_EQ(stats.num_prefill_tokens, 16);
  EXPECT_EQ(stats.num_decode_rows, 0);
  // A decode step of row a.
  a.tokens.push_back(samples[0].token_id);
  const BatchRow dec = [&] {
    BatchRow r = Row(a, 10, 11);
    r.params = &greedy;
    return r;
  }();
  samples.clear();
  ASSERT_TRUE(step->Step({&dec, 1}, &samples, &stats).ok());
  EXPECT_EQ(stats.num_decode_rows, 1);
  EXPECT_EQ(stats.num_prefill_tokens, 0);
}

TEST(CpuBackendTest, InvalidBatchesAreRejected) {
  const ModelConfig c = TinyConfig("llama");
  auto b = MakeBackend(c, 1);
  SamplingParams params;
  Seq s{{1, 2, 3, 4, 5}, {0, 1}};
  std::vector<float> logits;
  std::vector<SampleResult> samples;
  auto expect_bad = [&](BatchRow r, const char* what) {
    EXPECT_EQ(b->Forward({&r, 1}, &logits).code(), absl::StatusCode::kInvalidArgument) << what;
    r.params = &params;  // so Step fails for `what`, not for missing params
    EXPECT_EQ(b->Step({&r, 1}, &samples, nullptr).code(), absl::StatusCode::kInvalidArgument)
        << what;
  };
  BatchRow r = Row(s, 0, 5);
  r.num_pages = 1;
  expect_bad(r, "too few pages");
  Seq bad_page{{1, 2}, {kNumPages}};
  expect_bad(Row(bad_page, 0, 2), "page out of range");
  Seq bad_token{{1, c.vocab_size}, {0}};
  expect_bad(Row(bad_token, 0, 2), "token out of vocab");
  r = Row(s, 0, 5);
  r.num_tokens = 0;
  expect_bad(r, "no tokens");
  std::vector<int32_t> many_pages(c.max_position_embeddings / kPageSize + 1, 0);
  Seq too_long{{1}, many_pages};
  BatchRow past = Row(too_long, 0, 1);
  past.start_pos = c.max_position_embeddings;
  expect_bad(past, "past max context");
  // A sampled row without params fails Step (Forward needs none).
  BatchRow no_params = Row(s, 0, 5);
  EXPECT_EQ(b->Step({&no_params, 1}, &samples, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(b->Forward({&no_params, 1}, &logits).ok());
}

TEST(CpuBackendTest, CreateRejectsBadSizes) {
  const ModelConfig c = TinyConfig("llama");
  EXPECT_FALSE(CpuModelBackend::Create(RandomWeights(c, 1), 0, 4).ok());
  EXPECT_FALSE(CpuModelBackend::Create(RandomWeights(c, 1), 4, 0).ok());
  LlamaWeights w = RandomWeights(c, 1);
  w.layers[1].k_proj.pop_back();
  absl::StatusOr<std::unique_ptr<CpuModelBackend>> b = CpuModelBackend::Create(std::move(w), 4, 4);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(std::string(b.status().message()).find("model.layers.1.self_attn.k_proj.weight"),
            std::string::npos);
}

}  // namespace
}  // namespace pkv
