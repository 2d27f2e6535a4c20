// The filtered draw (top-k / top-p / min-p) against the CPU sampler on Llama-3-sized rows, where
// the kernel finds the cut among compacted candidates (sampling.h): flat rows (the cut in the
// bulk, candidates in every chunk), peaked rows (most mass on a few tokens), bf16-rounded rows
// (ties at the cut) and coarse-grid rows (too many ties for the candidates: the whole-row search).
// Each row is drawn with 8 sample indices, so a wrong kept set shows in the drawn tokens; the
// plans are read back to check the candidate path did run and its compaction agreed with it.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
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

enum class Shape { kFlat, kPeaked, kBf16, kGrid };

std::vector<float> ShapedLogits(Shape shape, int32_t vocab, std::mt19937* rng) {
  std::vector<float> l(vocab);
  const float sigma = std::uniform_real_distribution<float>(0.8f, 3.f)(*rng);
  std::normal_distribution<float> n(0.f, sigma);
  for (float& x : l) x = n(*rng);
  if (shape == Shape::kPeaked) {  // a handful of tokens far above the rest, in different chunks
    for (int k = 0; k < 6; ++k) l[(*rng)() % vocab] = 12.f + 2.f * static_cast<float>(k % 3);
  } else if (shape == Shape::kBf16) {  // keep 8 significant bits: hundreds of ties per value
    for (float& x : l) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u &= 0xffff0000u;
      std::memcpy(&x, &u, 4);
    }
  } else if (shape == Shape::kGrid) {
    for (float& x : l) x = std::round(x);
  }
  return l;
}

SamplingParams FilterParams(int variant, std::mt19937* rng) {
  SamplingParams p;
  p.seed = (static_cast<uint64_t>((*rng)()) << 32) | (*rng)();
  const float temps[] = {0.7f, 1.f, 1.f, 1.5f};
  p.temperature = temps[(*rng)() % 4];
  const float ps[] = {0.5f, 0.9f, 0.95f, 0.99f};
  const int32_t ks[] = {1, 20, 50, 1000, 40000};
  const float mins[] = {0.01f, 0.05f, 0.1f, 0.5f};
  switch (variant % 6) {
    case 0:
      p.top_p = ps[(*rng)() % 4];
      break;
    case 1:
      p.top_k = ks[(*rng)() % 5];
      break;
    case 2:
      p.min_p = mins[(*rng)() % 4];
      break;
    case 3:
      p.top_k = ks[(*rng)() % 5];
      p.top_p = ps[(*rng)() % 4];
      break;
    case 4:
      p.top_p = ps[(*rng)() % 4];
      p.min_p = mins[(*rng)() % 4];
      break;
    default:
      p.top_k = ks[(*rng)() % 5];
      p.top_p = ps[(*rng)() % 4];
      p.min_p = mins[(*rng)() % 4];
  }
  return p;
}

// Samples every row on the GPU and checks each against the CPU sampler; returns how many rows
// took the candidate path.
int RunAndCheck(int32_t vocab, const std::vector<float>& logits,
                const std::vector<SamplingParams>& params, const std::vector<int32_t>& index,
                const std::string& what) {
  const int32_t rows = static_cast<int32_t>(params.size());
  std::vector<gpu::SampleRowParams> dp(rows);
  for (int32_t r = 0; r < rows; ++r) {
    dp[r].temperature = params[r].temperature;
    dp[r].top_k = params[r].top_k;
    dp[r].top_p = params[r].top_p;
    dp[r].min_p = params[r].min_p;
    dp[r].seed = params[r].seed;
    dp[r].sample_index = index[r];
  }
  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dl = dev(int64_t{rows} * vocab * 4), dpar = dev(rows * sizeof(dp[0])), dn = dev(4),
               dres = dev(rows * sizeof(gpu::SampleRowResult)),
               dtop = dev(int64_t{rows} * gpu::kMaxTopLogprobs * sizeof(gpu::TopLogprob)),
               dws = dev(gpu::SampleWorkspaceBytes(rows));
  cudaMemcpy(dl.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dpar.get(), dp.data(), rows * sizeof(dp[0]), cudaMemcpyHostToDevice);
  cudaMemcpy(dn.get(), &rows, 4, cudaMemcpyHostToDevice);
  cudaMemset(dws.get(), 0x7f, gpu::SampleWorkspaceBytes(rows));  // poison the scratch
  gpu::SampleArgs a{static_cast<const float*>(dl.get()),
                    vocab,
                    static_cast<const gpu::SampleRowParams*>(dpar.get()),
                    static_cast<const int32_t*>(dn.get()),
                    rows,
                    static_cast<gpu::SampleRowResult*>(dres.get()),
                    static_cast<gpu::TopLogprob*>(dtop.get()),
                    dws.get()};
  EXPECT_TRUE(gpu::LaunchSample(a, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<gpu::SampleRowResult> res(rows);
  std::vector<gpu::SamplePlan> plans(rows);
  cudaMemcpy(res.data(), dres.get(), rows * sizeof(res[0]), cudaMemcpyDeviceToHost);
  const int64_t plan_off = gpu::SampleWorkspaceLayoutFor(rows).plans;
  cudaMemcpy(plans.data(), static_cast<char*>(dws.get()) + plan_off, rows * sizeof(plans[0]),
             cudaMemcpyDeviceToHost);
  int on_candidates = 0;
  for (int32_t r = 0; r < rows; ++r) {
    const SamplingParams& p = params[r];
    SampleResult want;
    const absl::Status st =
        SampleToken(absl::MakeConstSpan(&logits[int64_t{r} * vocab], vocab), p, index[r], &want);
    EXPECT_TRUE(st.ok()) << what << " " << st;
    if (!st.ok()) continue;
    EXPECT_EQ(res[r].token_id, want.token_id)
        << what << " row " << r << " T=" << p.temperature << " k=" << p.top_k << " p=" << p.top_p
        << " min_p=" << p.min_p << " plan mode " << plans[r].mode << " bins [" << plans[r].lo_bin
        << ", " << plans[r].hi_bin << "]";
    EXPECT_EQ(plans[r].mismatch, 0) << what << " row " << r;
    on_candidates += plans[r].mode == gpu::kSamplePlanCandidates;
  }
  return on_candidates;
}

TEST(SamplingFilterTest, FilteredDrawMatchesCpuSampler) {
  std::mt19937 rng(::pkv::testing::TestSeed() + 3);
  const int32_t vocab = 128256, kDraws = 8;
  for (Shape shape : {Shape::kFlat, Shape::kPeaked, Shape::kBf16, Shape::kGrid}) {
    std::vector<float> logits;
    std::vector<SamplingParams> params;
    std::vector<int32_t> index;
    for (int variant = 0; variant < 12; ++variant) {  // B = 96 rows, different params
      const std::vector<float> l = ShapedLogits(shape, vocab, &rng);
      const SamplingParams p = FilterParams(variant, &rng);
      for (int d = 0; d < kDraws; ++d) {
        logits.insert(logits.end(), l.begin(), l.end());
        params.push_back(p);
        index.push_back(static_cast<int32_t>(rng() % 100000));
      }
    }
    const std::string what = absl::StrCat("shape ", static_cast<int>(shape));
    const int on_candidates = RunAndCheck(vocab, logits, params, index, what);
    std::printf("%s: %d of %zu rows on the candidate path\n", what.c_str(), on_candidates,
                params.size());
    if (shape == Shape::kFlat || shape == Shape::kPeaked) {
      EXPECT_GT(on_candidates, static_cast<int>(params.size()) / 2) << what;
    }
  }
}

// Small vocabularies: empty and one-token chunks, and a few bins holding everything.
TEST(SamplingFilterTest, SmallVocabulariesMatchCpuSampler) {
  std::mt19937 rng(::pkv::testing::TestSeed() + 4);
  for (int32_t vocab : {2, 31, 33, 4097}) {
    std::vector<float> logits;
    std::vector<SamplingParams> params;
    std::vector<int32_t> index;
    for (int variant = 0; variant < 24; ++variant) {
      const std::vector<float> l = ShapedLogits(static_cast<Shape>(variant % 4), vocab, &rng);
      logits.insert(logits.end(), l.begin(), l.end());
      SamplingParams p = FilterParams(variant, &rng);
      if (p.top_k >= vocab) p.top_k = vocab - 1;
      params.push_back(p);
      index.push_back(static_cast<int32_t>(rng() % 100000));
    }
    RunAndCheck(vocab, logits, params, index, absl::StrCat("vocab ", vocab));
  }
}

}  // namespace
}  // namespace pkv
