#include "worker/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "tests/harness/test_seed.h"

namespace pkv {
namespace {

std::vector<float> RandomLogits(int n, uint32_t seed, float scale = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> l(n);
  for (float& v : l) v = normal(rng);
  return l;
}

int32_t Sample(const std::vector<float>& logits, const SamplingParams& p, int64_t index,
               SampleResult* out = nullptr) {
  SampleResult local;
  SampleResult* r = out ? out : &local;
  absl::Status st = SampleToken(logits, p, index, r);
  EXPECT_TRUE(st.ok()) << st;
  return r->token_id;
}

// Softmax of logits / t in double, computed here independently.
std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  double mx = -1e300;
  for (float v : logits) mx = std::max(mx, v / t);
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp(logits[i] / t - mx));
  for (double& v : p) v /= sum;
  return p;
}

uint32_t Seed() { return ::pkv::testing::TestSeed(); }

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  for (uint32_t s = 0; s < 50; ++s) {
    const std::vector<float> l = RandomLogits(1000, Seed() + s);
    EXPECT_EQ(Sample(l, p, s), std::max_element(l.begin(), l.end()) - l.begin());
  }
  std::vector<float> tie = {0.5f, 3.0f, -1.0f, 3.0f, 3.0f};
  EXPECT_EQ(Sample(tie, p, 0), 1);
  tie[0] = std::numeric_limits<float>::quiet_NaN();  // NaN never wins
  EXPECT_EQ(Sample(tie, p, 0), 1);
}

TEST(SamplerTest, SameSeedAndIndexSameToken) {
  const std::vector<float> l = RandomLogits(500, Seed(), 0.5f);  // flat: many plausible tokens
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 0x1234567890abcdefull ^ Seed();
  for (int64_t i = 0; i < 200; ++i) EXPECT_EQ(Sample(l, p, i), Sample(l, p, i));
  // Different seeds (and different indices) give different streams.
  SamplingParams q = p;
  q.seed = p.seed + 1;
  int same_seed_diff = 0, same_index_diff = 0;
  for (int64_t i = 0; i < 200; ++i) {
    same_seed_diff += Sample(l, p, i) != Sample(l, q, i);
    same_index_diff += Sample(l, p, i) != Sample(l, p, i + 1);
  }
  EXPECT_GT(same_seed_diff, 150);
  EXPECT_GT(same_index_diff, 150);
}

TEST(SamplerTest, CounterUniformIsUniformAndKeyed) {
  std::vector<int> buckets(10, 0);
  const int n = 100000;
  std::set<double> seen;
  for (int i = 0; i < n; ++i) {
    const double u = CounterUniform(Seed(), i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++buckets[static_cast<int>(u * 10)];
    seen.insert(u);
  }
  for (int b : buckets) EXPECT_NEAR(b, n / 10, 600);  // ~6 sigma
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_NE(CounterUniform(1, 0), CounterUniform(2, 0));
  EXPECT_NE(CounterUniform(1, 0), CounterUniform(0, 1));
}

TEST(SamplerTest, TopKOneAndTinyTopPAreGreedy) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (uint32_t s = 0; s < 30; ++s) {
    const std::vector<float> l = RandomLogits(300, Seed() + s, 0.3f);
    SamplingParams k1;
    k1.temperature = 1.5f;
    k1.top_k = 1;
    k1.seed = s;
    SamplingParams p0;
    p0.temperature = 1.5f;
    p0.top_p = 1e-6f;
    p0.seed = s;
    SamplingParams m1;  // min_p = 1 keeps only the top token
    m1.temperature = 1.5f;
    m1.min_p = 1.0f;
    m1.seed = s;
    const int32_t want = Sample(l, greedy, 0);
    for (int64_t i = 0; i < 10; ++i) {
      EXPECT_EQ(Sample(l, k1, i), want);
      EXPECT_EQ(Sample(l, p0, i), want);
      EXPECT_EQ(Sample(l, m1, i), want);
    }
  }
}

TEST(SamplerTest, FiltersKeepOnlyAllowedTokens) {
  const std::vector<float> l = RandomLogits(200, Seed(), 1.0f);
  const std::vector<double> prob = Softmax(l, 0.8);
  std::vector<int> rank(l.size());
  std::iota(rank.begin(), rank.end(), 0);
  std::sort(rank.begin(), rank.end(), [&](int a, int b) { return l[a] > l[b]; });
  const std::set<int> top5(rank.begin(), rank.begin() + 5);
  // Nucleus of mass 0.5, computed here.
  std::set<int> nucleus;
  double cum = 0;
  for (int id : rank) {
    nucleus.insert(id);
    if ((cum += prob[id]) >= 0.5) break;
  }
  const double pmax = prob[rank[0]];
  SamplingParams k, tp, mp;
  k.temperature = tp.temperature = mp.temperature = 0.8f;
  k.top_k = 5;
  tp.top_p = 0.5f;
  mp.min_p = 0.3f;
  std::set<int> seen_k, seen_p, seen_m;
  for (int64_t i = 0; i < 3000; ++i) {
    k.seed = tp.seed = mp.seed = Seed();
    const int a = Sample(l, k, i), b = Sample(l, tp, i), c = Sample(l, mp, i);
    EXPECT_TRUE(top5.count(a)) << a;
    EXPECT_TRUE(nucleus.count(b)) << b;
    EXPECT_GE(prob[c], 0.3 * pmax * (1 - 1e-9)) << c;
    seen_k.insert(a);
    seen_p.insert(b);
    seen_m.insert(c);
  }
  EXPECT_EQ(seen_k, top5);  // every kept token does come up
  EXPECT_EQ(seen_p, nucleus);
  // min_p keeps every token within 0.3x of the top one; each of them comes up (the random logits
  // decide how many there are: sometimes only the top token survives).
  for (int id : rank) {
    if (prob[id] < 0.3 * pmax * (1 + 1e-6)) break;
    EXPECT_TRUE(seen_m.count(id)) << "min_p kept token " << id << " never sampled";
  }
}

// Over many indices, the empirical frequencies match softmax(logits / t).
TEST(SamplerTest, FrequenciesMatchSoftmax) {
  const std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f, -3.0f, 0.2f};
  for (float t : {0.7f, 1.0f, 1.6f}) {
    const std::vector<double> prob = Softmax(l, t);
    SamplingParams p;
    p.temperature = t;
    p.seed = Seed() + static_cast<uint64_t>(t * 10);
    const int n = 40000;
    std::vector<int> count(l.size(), 0);
    for (int64_t i = 0; i < n; ++i) ++count[Sample(l, p, i)];
    for (size_t id = 0; id < l.size(); ++id) {
      const double sd = std::sqrt(n * prob[id] * (1 - prob[id]));
      EXPECT_NEAR(count[id], n * prob[id], 5 * sd + 5) << "t " << t << " id " << id;
    }
  }
}

// With top_k the draw follows the renormalised kept distribution.
TEST(SamplerTest, TopKFrequenciesAreRenormalised) {
  const std::vector<float> l = {0.1f, 2.0f, 1.0f, 1.9f, -0.5f, 1.2f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;  // keeps ids 1, 3, 5
  p.seed = Seed();
  const std::vector<double> prob = Softmax({l[1], l[3], l[5]}, 1.0);
  const int n = 30000;
  std::map<int, int> count;
  for (int64_t i = 0; i < n; ++i) ++count[Sample(l, p, i)];
  ASSERT_EQ(count.size(), 3u);
  const int ids[3] = {1, 3, 5};
  for (int j = 0; j < 3; ++j) {
    const double sd = std::sqrt(n * prob[j] * (1 - prob[j]));
    EXPECT_NEAR(count[ids[j]], n * prob[j], 5 * sd);
  }
}

TEST(SamplerTest, LogprobsAreNormalisedLogSoftmax) {
  const std::vector<float> l = RandomLogits(64, Seed(), 1.5f);
  for (float t : {0.0f, 0.5f, 1.3f}) {
    SamplingParams p;
    p.temperature = t;
    p.logprobs = true;
    p.top_logprobs = 64;  // the whole vocabulary
    p.seed = Seed();
    SampleResult r;
    Sample(l, p, 3, &r);
    ASSERT_EQ(r.top.size(), 64u);
    const std::vector<double> prob = Softmax(l, t > 0 ? t : 1.0);
    double total = 0;
    for (size_t j = 0; j < r.top.size(); ++j) {
      total += std::exp(double{r.top[j].logprob});
      EXPECT_NEAR(r.top[j].logprob, std::log(prob[r.top[j].token_id]), 1e-5);
      if (j > 0) {
        EXPECT_GE(r.top[j - 1].logprob, r.top[j].logprob);
      }
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
    EXPECT_NEAR(r.logprob, std::log(prob[r.token_id]), 1e-5);
    // A shorter top list is the prefix of the full one.
    p.top_logprobs = 5;
    SampleResult r5;
    Sample(l, p, 3, &r5);
    ASSERT_EQ(r5.top.size(), 5u);
    for (int j = 0; j < 5; ++j) EXPECT_EQ(r5.top[j].token_id, r.top[j].token_id);
    EXPECT_EQ(r5.token_id, r.token_id);
  }
}

TEST(SamplerTest, NoLogprobsUnlessAsked) {
  SamplingParams p;
  p.top_logprobs = 3;  // ignored without logprobs
  SampleResult r;
  r.top.push_back({1, -1.0f});
  Sample(RandomLogits(10, 1), p, 0, &r);
  EXPECT_TRUE(r.top.empty());
  EXPECT_EQ(r.logprob, 0.0f);
}

TEST(SamplerTest, BadInputsAreInvalidArgument) {
  SampleResult r;
  SamplingParams p;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(SampleToken({}, p, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> masked = {-inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(SampleToken(masked, p, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> l = {1, 2, 3};
  SamplingParams bad = p;
  bad.top_p = 0.0f;
  EXPECT_EQ(SampleToken(l, bad, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  bad = p;
  bad.min_p = 1.5f;
  EXPECT_EQ(SampleToken(l, bad, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  bad = p;
  bad.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(SampleToken(l, bad, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  bad = p;
  bad.top_k = -1;
  EXPECT_EQ(SampleToken(l, bad, 0, &r).code(), absl::StatusCode::kInvalidArgument);
  // -inf logits are masked tokens: never sampled.
  const std::vector<float> partly = {-inf, 0.0f, -inf, 0.0f};
  for (int64_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(SampleToken(partly, p, i, &r).ok());
    EXPECT_TRUE(r.token_id == 1 || r.token_id == 3);
  }
}

}  // namespace
}  // namespace pkv
