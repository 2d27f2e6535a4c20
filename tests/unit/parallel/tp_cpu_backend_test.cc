// The tensor-parallel CPU backend against the single-rank CPU backend: TP=1 is the same bits,
// TP=2/4 give the same greedy tokens and logits within float rounding, over mixed batches
// (chunked prefill next to decode rows) on shuffled, shared page ids; runs are reproducible; bad
// configurations and batches are refused clearly.
#include "worker/model/tp_cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/model/test_model.h"
#include "tests/unit/parallel/tp_test_util.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/tp_shard.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/random_model.h"

namespace pkv {
namespace {

using ::pkv::testing::RandomWeights;
using ::pkv::testing::ScratchDir;
using ::pkv::testing::TinyConfig;
using ::pkv::testing::WideConfig;

constexpr int32_t kPageSize = 4;
constexpr int64_t kNumPages = 96;

std::unique_ptr<TpCpuBackend> MakeTp(const LlamaWeights& full, int tp) {
  std::vector<LlamaWeights> shards;
  for (int r = 0; r < tp; ++r) {
    auto s = ShardLlamaWeights(full, tp, r);
    EXPECT_TRUE(s.ok()) << s.status();
    shards.push_back(*std::move(s));
  }
  auto b = TpCpuBackend::Create(full.config, std::move(shards), kPageSize, kNumPages);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

std::unique_ptr<CpuModelBackend> MakeCpu(const LlamaWeights& full) {
  auto b = CpuModelBackend::Create(full, kPageSize, kNumPages);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

// Sequences sharing one page pool: each gets 24 distinct page ids from a shuffled pool, as the
// scheduler's allocator hands them out.
struct Workload {
  std::vector<std::vector<int32_t>> tokens;  // prompt (+ generated, for greedy runs)
  std::vector<int32_t> prompt_len;
  std::vector<std::vector<int32_t>> pages;
};

Workload MakeWorkload(int vocab, uint32_t seed, std::vector<int32_t> prompt_lens) {
  std::mt19937 rng(seed);
  std::vector<int32_t> pool(kNumPages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  Workload w;
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    std::vector<int32_t> t(prompt_lens[i]);
    for (int32_t& v : t) v = static_cast<int32_t>(rng() % vocab);
    w.tokens.push_back(t);
    w.prompt_len.push_back(prompt_lens[i]);
    w.pages.emplace_back(pool.begin() + i * 24, pool.begin() + (i + 1) * 24);
  }
  return w;
}

// Drives the workload like the scheduler: each step, a sequence still in its prompt feeds a chunk
// of up to 5 tokens (sampling when the prompt is done), others feed their last token. With
// `greedy`, Step() samples and appends; without, Forward() runs over the tokens already there
// (teacher forcing, every row samples) and the logits of every step are returned.
std::vector<float> Drive(ModelBackend* b, Workload* w, int decode_steps, bool greedy) {
  const size_t n = w->tokens.size();
  std::vector<int32_t> fed(n, 0);
  const int32_t target =
      *std::max_element(w->prompt_len.begin(), w->prompt_len.end()) + decode_steps;
  std::vector<float> all_logits;
  SamplingParams params;
  params.temperature = 0.0f;
  for (int step = 0; step < 200; ++step) {
    std::vector<BatchRow> rows;
    std::vector<size_t> which;
    for (size_t i = 0; i < n; ++i) {
      const int32_t limit = greedy ? static_cast<int32_t>(w->tokens[i].size())
                                   : std::min<int32_t>(target, w->tokens[i].size());
      if (fed[i] >= limit || fed[i] >= target) continue;
      BatchRow r;
      r.start_pos = fed[i];
      r.num_tokens = fed[i] < w->prompt_len[i] ? std::min(5, w->prompt_len[i] - fed[i]) : 1;
      r.tokens = w->tokens[i].data() + fed[i];
      r.pages = w->pages[i].data();
      r.num_pages = static_cast<int32_t>(w->pages[i].size());
      r.sample = greedy ? fed[i] + r.num_tokens == static_cast<int32_t>(w->tokens[i].size()) : true;
      r.params = &params;
      r.sample_index = std::max(0, fed[i] + r.num_tokens - w->prompt_len[i]);
      rows.push_back(r);
      which.push_back(i);
    }
    if (rows.empty()) break;
    if (greedy) {
      std::vector<SampleResult> samples;
      StepStats stats;
      absl::Status st = b->Step(rows, &samples, &stats);
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok()) break;
      size_t s = 0;
      for (size_t k = 0; k < rows.size(); ++k) {
        fed[which[k]] += rows[k].num_tokens;
        if (rows[k].sample) w->tokens[which[k]].push_back(samples.at(s++).token_id);
      }
    } else {
      std::vector<float> logits;
      absl::Status st = b->Forward(rows, &logits);
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok()) break;
      all_logits.insert(all_logits.end(), logits.begin(), logits.end());
      for (size_t k = 0; k < rows.size(); ++k) fed[which[k]] += rows[k].num_tokens;
    }
  }
  return all_logits;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max |a - b| / max(1, max |b|).
double RelMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_TRUE(std::isfinite(a[i])) << i;
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

struct Case {
  std::string name;
  ModelConfig config;
  std::vector<int> tps;  // > 1
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  return {{"tiny_llama", TinyConfig("llama"), {2}},
          {"tiny_qwen2", TinyConfig("qwen2"), {2}},
          {"tiny_qwen3", TinyConfig("qwen3"), {2, 4}},
          {"wide", WideConfig(), {2, 4}}};
}

class TpCpuBackendTest : public ::testing::TestWithParam<Case> {};

TEST_P(TpCpuBackendTest, TpOneIsTheCpuBackendBitForBit) {
  const LlamaWeights full = RandomWeights(GetParam().config, 31);
  Workload w1 = MakeWorkload(GetParam().config.vocab_size, 9, {13, 6, 21});
  Workload w2 = w1;
  auto cpu = MakeCpu(full);
  auto tp1 = MakeTp(full, 1);
  ASSERT_TRUE(cpu && tp1);
  const std::vector<float> want = Drive(cpu.get(), &w1, 6, /*greedy=*/false);
  const std::vector<float> got = Drive(tp1.get(), &w2, 6, /*greedy=*/false);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(SameBits(got, want)) << "max rel diff " << RelMaxDiff(got, want);
}

TEST_P(TpCpuBackendTest, ShardedLogitsMatchTpOneWithinRounding) {
  const LlamaWeights full = RandomWeights(GetParam().config, 32);
  const Workload base = MakeWorkload(GetParam().config.vocab_size, 10, {17, 4, 9, 12});
  Workload w = base;
  auto cpu = MakeCpu(full);
  ASSERT_TRUE(cpu);
  const std::vector<float> want = Drive(cpu.get(), &w, 8, /*greedy=*/false);
  for (int tp : GetParam().tps) {
    auto b = MakeTp(full, tp);
    ASSERT_TRUE(b);
    Workload wt = base;
    const std::vector<float> got = Drive(b.get(), &wt, 8, /*greedy=*/false);
    // Float rounding of tp partial sums per row-parallel projection, over a few layers.
    EXPECT_LT(RelMaxDiff(got, want), 5e-6) << "tp " << tp;
  }
}

TEST_P(TpCpuBackendTest, GreedyTokensEqualTpOne) {
  const LlamaWeights full = RandomWeights(GetParam().config, 33);
  const Workload base = MakeWorkload(GetParam().config.vocab_size, 11, {11, 3, 19});
  Workload want = base;
  auto cpu = MakeCpu(full);
  ASSERT_TRUE(cpu);
  Drive(cpu.get(), &want, 24, /*greedy=*/true);
  for (size_t i = 0; i < want.tokens.size(); ++i) {
    ASSERT_GE(want.tokens[i].size(), base.tokens[i].size() + 20) << "sequence " << i;
  }
  for (int tp : GetParam().tps) {
    auto b = MakeTp(full, tp);
    ASSERT_TRUE(b);
    Workload got = base;
    Drive(b.get(), &got, 24, /*greedy=*/true);
    EXPECT_EQ(got.tokens, want.tokens) << "tp " << tp;
    EXPECT_EQ(b->last_num_collectives(), 2 * GetParam().config.num_layers + 2);
  }
}

TEST_P(TpCpuBackendTest, RunsAreBitReproducible) {
  const LlamaWeights full = RandomWeights(GetParam().config, 34);
  const int tp = GetParam().tps.back();
  const Workload base = MakeWorkload(GetParam().config.vocab_size, 12, {8, 15});
  Workload w1 = base, w2 = base;
  auto a = MakeTp(full, tp);
  auto b = MakeTp(full, tp);
  ASSERT_TRUE(a && b);
  const std::vector<float> first = Drive(a.get(), &w1, 6, /*greedy=*/false);
  const std::vector<float> second = Drive(b.get(), &w2, 6, /*greedy=*/false);
  EXPECT_TRUE(SameBits(first, second));
}

TEST_P(TpCpuBackendTest, EachRankHoldsItsShareOfWeightsAndKv) {
  const ModelConfig& c = GetParam().config;
  const LlamaWeights full = RandomWeights(c, 35);
  for (int tp : GetParam().tps) {
    auto b = MakeTp(full, tp);
    ASSERT_TRUE(b);
    const int64_t full_kv = 2LL * c.num_layers * kNumPages * c.num_kv_heads * kPageSize *
                            c.head_dim * static_cast<int64_t>(sizeof(float));
    EXPECT_EQ(b->rank_kv_bytes() * tp, full_kv);
    int64_t full_weights = 0;
    for (const TensorSpec& s : LlamaTensorSpecs(c)) full_weights += s.numel() * 4;
    EXPECT_LT(b->rank_weight_bytes(), full_weights);
    EXPECT_EQ(b->tp(), tp);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TpCpuBackendTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(TpCpuBackendErrorsTest, InvalidBatchIsRefusedAndTheBackendStillWorks) {
  const LlamaWeights full = RandomWeights(WideConfig(), 40);
  auto b = MakeTp(full, 2);
  ASSERT_TRUE(b);
  std::vector<int32_t> tokens = {1, 2, 5000};  // 5000 is outside the vocabulary
  std::vector<int32_t> pages = {7};
  BatchRow r;
  r.tokens = tokens.data();
  r.num_tokens = 3;
  r.pages = pages.data();
  r.num_pages = 1;
  r.sample = true;
  std::vector<float> logits;
  const absl::Status bad = b->Forward({&r, 1}, &logits);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "outside the vocabulary")) << bad;
  pages = {kNumPages};  // out of range
  tokens[2] = 3;
  EXPECT_EQ(b->Forward({&r, 1}, &logits).code(), absl::StatusCode::kInvalidArgument);
  pages = {3};
  EXPECT_TRUE(b->Forward({&r, 1}, &logits).ok());
  EXPECT_EQ(logits.size(), size_t{1001});
}

TEST(TpCpuBackendErrorsTest, CreateRefusesShardsOfAnotherSplit) {
  const ModelConfig c = WideConfig();
  const LlamaWeights full = RandomWeights(c, 41);
  std::vector<LlamaWeights> shards;
  shards.push_back(*ShardLlamaWeights(full, 2, 0));
  shards.push_back(*ShardLlamaWeights(full, 4, 1));  // a rank of a 4-way split
  auto b = TpCpuBackend::Create(c, std::move(shards), kPageSize, kNumPages);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(b.status().message(), "shard 1")) << b.status();
  std::vector<LlamaWeights> three;
  for (int r = 0; r < 3; ++r) three.push_back(*ShardLlamaWeights(full, 1, 0));
  auto c3 = TpCpuBackend::Create(c, std::move(three), kPageSize, kNumPages);
  EXPECT_EQ(c3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c3.status().message(), "num_key_value_heads 4")) << c3.status();
  std::vector<LlamaWeights> one;
  one.push_back(*ShardLlamaWeights(full, 1, 0));
  EXPECT_EQ(TpCpuBackend::Create(c, std::move(one), 0, kNumPages).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The worker's path: a model directory written by pkv-make-model's writer, loaded split two ways
// (each rank reading its slices of the checkpoint), serves the same greedy tokens as the plain
// CPU backend; four ways is refused with the valid choices.
TEST(TpCpuBackendLoadTest, LoadedFromDiskMatchesCpuBackend) {
  ScratchDir dir("tp_backend_load");
  RandomModelOptions opt;
  opt.out_dir = dir.path();
  opt.config = *ModelShapeConfig("tiny");
  opt.seed = 3;
  ASSERT_TRUE(WriteRandomModel(opt).ok());
  auto cpu = LoadCpuBackend(dir.path(), kPageSize, kNumPages);
  auto tp2 = LoadTpCpuBackend(dir.path(), 2, kPageSize, kNumPages);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(tp2.ok()) << tp2.status();
  const Workload base = MakeWorkload(opt.config.vocab_size, 13, {9, 14});
  Workload want = base, got = base;
  Drive(cpu->get(), &want, 20, /*greedy=*/true);
  Drive(tp2->get(), &got, 20, /*greedy=*/true);
  EXPECT_EQ(got.tokens, want.tokens);
  auto tp4 = LoadTpCpuBackend(dir.path(), 4, kPageSize, kNumPages);
  EXPECT_EQ(tp4.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(tp4.status().message(), "valid --tp for this model: 1, 2"))
      << tp4.status();
}

}  // namespace
}  // namespace pkv
