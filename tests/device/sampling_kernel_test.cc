// The GPU sampling kernel against the CPU sampler (worker/model/sampler.h) on the same logits:
// greedy, temperature, top-k, top-p, min-p and their combinations, per-row seeds and sample
// indices, log-probabilities and top log-probabilities; vocabularies from 1 to Llama-3's 128256;
// rows with ties, -inf and NaN; an all -inf row is reported; rows past the device-side count are
// left untouched.
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/model/sampling.h"
#include "tests/harness/test_seed.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/model/sampler.h"

namespace pkv {
namespace {

using cuda_backend::DeviceBuffer;

SamplingParams RandomParams(int32_t vocab, std::mt19937* rng) {
  SamplingParams p;
  std::uniform_int_distribution<int> pick(0, 9);
  const int kind = pick(*rng);
  p.seed = (static_cast<uint64_t>((*rng)()) << 32) | (*rng)();
  p.temperature = kind == 0 ? 0.f : std::uniform_real_distribution<float>(0.3f, 2.f)(*rng);
  const int32_t ks[] = {0, 1, 2, 5, 50, vocab - 1, vocab + 5};
  const float ps[] = {1.f, 0.95f, 0.7f, 0.3f, 0.01f};
  const float mins[] = {0.f, 0.f, 0.02f, 0.3f, 1.f};
  p.top_k = (kind == 1 || kind >= 5) ? ks[(*rng)() % 7] : 0;
  p.top_p = (kind == 2 || kind >= 6) ? ps[(*rng)() % 5] : 1.f;
  p.min_p = (kind == 3 || kind >= 7) ? mins[(*rng)() % 5] : 0.f;
  p.logprobs = (*rng)() % 2 == 0;
  p.top_logprobs = p.logprobs ? static_cast<int32_t>((*rng)() % 21) : 0;
  if (p.top_k < 0) p.top_k = 0;
  return p;
}

// Normal logits at a random scale; some rows get ties (repeated values), -inf and NaN entries.
std::vector<float> RandomLogits(int32_t vocab, std::mt19937* rng) {
  std::vector<float> l(vocab);
  const float scale = std::uniform_real_distribution<float>(0.5f, 8.f)(*rng);
  std::normal_distribution<float> n(0.f, scale);
  for (float& x : l) x = n(*rng);
  const int flavour = (*rng)() % 4;
  if (flavour == 1) {  // heavy ties: values on a coarse grid
    for (float& x : l) x = std::round(x);
  } else if (flavour == 2 && vocab > 3) {
    for (int i = 0; i < vocab / 4; ++i) l[(*rng)() % vocab] = -INFINITY;
    l[(*rng)() % vocab] = std::numeric_limits<float>::quiet_NaN();
  } else if (flavour == 3 && vocab > 1) {  // a tie at the top
    const int32_t a = (*rng)() % vocab, b = (*rng)() % vocab;
    l[a] = l[b] = 3.f * scale;
  }
  return l;
}

// unfiltered: temperature only (the OpenAI default), the draw that walks one pre-pass chunk.
void RunBatch(int32_t vocab, int32_t rows, std::mt19937* rng, bool unfiltered = false) {
  std::vector<float> logits;
  std::vector<SamplingParams> params;
  std::vector<gpu::SampleRowParams> dev_params;
  for (int32_t r = 0; r < rows; ++r) {
    std::vector<float> l = RandomLogits(vocab, rng);
    logits.insert(logits.end(), l.begin(), l.end());
    params.push_back(RandomParams(vocab, rng));
    if (unfiltered) {
      params.back().temperature = std::uniform_real_distribution<float>(0.3f, 2.f)(*rng);
      params.back().top_k = 0;
      params.back().top_p = 1.f;
      params.back().min_p = 0.f;
    }
    const SamplingParams& p = params.back();
    gpu::SampleRowParams d;
    d.temperature = p.temperature;
    d.top_k = p.top_k;
    d.top_p = p.top_p;
    d.min_p = p.min_p;
    d.seed = p.seed;
    d.sample_index = static_cast<int32_t>((*rng)() % 100000);
    d.logprobs = p.logprobs;
    d.top_logprobs = p.top_logprobs;
    dev_params.push_back(d);
  }
  const int32_t grid = rows + 2;  // two extra CTAs must exit without writing
  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dl = dev(int64_t{grid} * vocab * 4), dp = dev(grid * sizeof(gpu::SampleRowParams)),
               dn = dev(4), dres = dev(grid * sizeof(gpu::SampleRowResult)),
               dtop = dev(int64_t{grid} * gpu::kMaxTopLogprobs * sizeof(gpu::TopLogprob)),
               dws = dev(gpu::SampleWorkspaceBytes(grid));
  cudaMemcpy(dl.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dp.get(), dev_params.data(), rows * sizeof(gpu::SampleRowParams),
             cudaMemcpyHostToDevice);
  cudaMemcpy(dn.get(), &rows, 4, cudaMemcpyHostToDevice);
  cudaMemset(dres.get(), 0x7f, grid * sizeof(gpu::SampleRowResult));  // poison
  gpu::SampleArgs a;
  a.logits = static_cast<const float*>(dl.get());
  a.vocab = vocab;
  a.params = static_cast<const gpu::SampleRowParams*>(dp.get());
  a.num_rows = static_cast<const int32_t*>(dn.get());
  a.max_rows = grid;
  a.results = static_cast<gpu::SampleRowResult*>(dres.get());
  a.top = static_cast<gpu::TopLogprob*>(dtop.get());
  a.workspace = dws.get();
  ASSERT_TRUE(gpu::LaunchSample(a, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<gpu::SampleRowResult> res(grid);
  std::vector<gpu::TopLogprob> top(int64_t{grid} * gpu::kMaxTopLogprobs);
  cudaMemcpy(res.data(), dres.get(), res.size() * sizeof(res[0]), cudaMemcpyDeviceToHost);
  cudaMemcpy(top.data(), dtop.get(), top.size() * sizeof(top[0]), cudaMemcpyDeviceToHost);
  for (int32_t r = 0; r < rows; ++r) {
    const SamplingParams& p = params[r];
    SampleResult want;
    const absl::Status st = SampleToken(absl::MakeConstSpan(&logits[int64_t{r} * vocab], vocab), p,
                                        dev_params[r].sample_index, &want);
    const std::string what = absl::StrCat("vocab ", vocab, " row ", r, " T=", p.temperature,
                                          " k=", p.top_k, " p=", p.top_p, " min_p=", p.min_p);
    if (!st.ok()) {
      EXPECT_EQ(res[r].status, gpu::kSampleBadLogits) << what;
      continue;
    }
    ASSERT_EQ(res[r].status, gpu::kSampleOk) << what;
    EXPECT_EQ(res[r].token_id, want.token_id) << what;
    if (p.logprobs) {
      EXPECT_NEAR(res[r].logprob, want.logprob, 1e-4 * (1 + std::abs(want.logprob))) << what;
      ASSERT_EQ(res[r].num_top, static_cast<int32_t>(want.top.size())) << what;
      for (size_t j = 0; j < want.top.size(); ++j) {
        const gpu::TopLogprob& g = top[int64_t{r} * gpu::kMaxTopLogprobs + j];
        EXPECT_EQ(g.token_id, want.top[j].token_id) << what << " top " << j;
        if (std::isfinite(want.top[j].logprob)) {
          EXPECT_NEAR(g.logprob, want.top[j].logprob, 1e-4 * (1 + std::abs(want.top[j].logprob)));
        }
      }
    }
  }
  for (int32_t r = rows; r < grid; ++r) {  // untouched: still the poison pattern
    EXPECT_EQ(res[r].token_id, 0x7f7f7f7f) << "row " << r << " past the device-side count";
  }
}

TEST(SamplingKernelTest, MatchesCpuSampler) {
  std::mt19937 rng(::pkv::testing::TestSeed());
  for (int32_t vocab : {1, 2, 7, 512, 1000, 50257}) RunBatch(vocab, 24, &rng);
  RunBatch(128256, 12, &rng);
}

// The unfiltered draw picks a chunk of the pre-pass by mass, then walks it: vocabularies with
// empty chunks (< kSampleChunks), one-token chunks, a ragged last chunk and Llama-3's; the rows'
// random scales (0.5 to 8) move the target from the max's chunk to any chunk.
TEST(SamplingKernelTest, UnfilteredDrawMatchesCpuSamplerInEveryChunk) {
  std::mt19937 rng(::pkv::testing::TestSeed() + 2);
  for (int32_t vocab : {1, 31, 32, 33, 4097, 128256}) {
    RunBatch(vocab, 48, &rng, /*unfiltered=*/true);
  }
}

// Regression (H200, 2026-11-29): with temperature != 1 a fused multiply-add made p(max) differ
// from exactly 1, so min_p = 1 kept nothing but the first of several tied maxima.
TEST(SamplingKernelTest, MinPOneKeepsEveryTiedMaximum) {
  std::mt19937 rng(::pkv::testing::TestSeed() + 1);
  const int32_t vocab = 512, rows = 16;
  std::vector<float> logits;
  std::vector<SamplingParams> params;
  for (int32_t r = 0; r < rows; ++r) {
    std::normal_distribution<float> n(0.f, 3.f);
    std::vector<float> l(vocab);
    for (float& x : l) x = n(rng);
    const float top = 20.f + static_cast<float>(r) * 0.37f;
    for (int k = 0; k < 2 + r % 3; ++k) l[rng() % vocab] = top;  // 2-4 tied maxima
    logits.insert(logits.end(), l.begin(), l.end());
    SamplingParams p;
    p.temperature = std::uniform_real_distribution<float>(0.3f, 2.f)(rng);
    p.min_p = 1.f;
    p.seed = rng();
    params.push_back(p);
  }
  std::vector<gpu::SampleRowParams> dev_params;
  for (int32_t r = 0; r < rows; ++r) {
    gpu::SampleRowParams d;
    d.temperature = params[r].temperature;
    d.min_p = 1.f;
    d.seed = params[r].seed;
    d.sample_index = r;
    dev_params.push_back(d);
  }
  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dl = dev(logits.size() * 4), dp = dev(rows * sizeof(gpu::SampleRowParams)),
               dn = dev(4), dres = dev(rows * sizeof(gpu::SampleRowResult)),
               dtop = dev(rows * gpu::kMaxTopLogprobs * sizeof(gpu::TopLogprob)),
               dws = dev(gpu::SampleWorkspaceBytes(rows));
  cudaMemcpy(dl.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dp.get(), dev_params.data(), rows * sizeof(gpu::SampleRowParams),
             cudaMemcpyHostToDevice);
  cudaMemcpy(dn.get(), &rows, 4, cudaMemcpyHostToDevice);
  gpu::SampleArgs a{static_cast<const float*>(dl.get()),
                    vocab,
                    static_cast<const gpu::SampleRowParams*>(dp.get()),
                    static_cast<const int32_t*>(dn.get()),
                    rows,
                    static_cast<gpu::SampleRowResult*>(dres.get()),
                    static_cast<gpu::TopLogprob*>(dtop.get()),
                    dws.get()};
  ASSERT_TRUE(gpu::LaunchSample(a, nullptr).ok());
  std::vector<gpu::SampleRowResult> res(rows);
  ASSERT_EQ(cudaMemcpy(res.data(), dres.get(), rows * sizeof(res[0]), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int32_t r = 0; r < rows; ++r) {
    SampleResult want;
    ASSERT_TRUE(
        SampleToken(absl::MakeConstSpan(&logits[int64_t{r} * vocab], vocab), params[r], r, &want)
            .ok());
    EXPECT_EQ(res[r].token_id, want.token_id) << "row " << r << " T=" << params[r].temperature;
  }
}

TEST(SamplingKernelTest, AllInfiniteRowIsReported) {
  const int32_t vocab = 300;
  std::vector<float> logits(vocab, -INFINITY);
  logits[5] = std::numeric_limits<float>::quiet_NaN();
  gpu::SampleRowParams p;
  int32_t one = 1;
  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dl = dev(vocab * 4), dp = dev(sizeof(p)), dn = dev(4),
               dres = dev(sizeof(gpu::SampleRowResult)),
               dtop = dev(gpu::kMaxTopLogprobs * sizeof(gpu::TopLogprob)),
               dws = dev(gpu::SampleWorkspaceBytes(1));
  cudaMemcpy(dl.get(), logits.data(), vocab * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dp.get(), &p, sizeof(p), cudaMemcpyHostToDevice);
  cudaMemcpy(dn.get(), &one, 4, cudaMemcpyHostToDevice);
  gpu::SampleArgs a{static_cast<const float*>(dl.get()),
                    vocab,
                    static_cast<const gpu::SampleRowParams*>(dp.get()),
                    static_cast<const int32_t*>(dn.get()),
                    1,
                    static_cast<gpu::SampleRowResult*>(dres.get()),
                    static_cast<gpu::TopLogprob*>(dtop.get()),
                    dws.get()};
  ASSERT_TRUE(gpu::LaunchSample(a, nullptr).ok());
  gpu::SampleRowResult r;
  ASSERT_EQ(cudaMemcpy(&r, dres.get(), sizeof(r), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(r.status, gpu::kSampleBadLogits);
}

}  // namespace
}  // namespace pkv
