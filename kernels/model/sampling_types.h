// Plain data exchanged between the host and the sampling kernel (sampling.h): per-row parameters
// in, chosen ids and log-probabilities out. No CUDA include, so host-only code (the CUDA backend's
// step builder and its unit tests) can fill and read them.
#pragma once

#include <cstdint>

namespace pkv::gpu {

inline constexpr int32_t kMaxTopLogprobs = 32;
inline constexpr int32_t kSampleOk = 0;
inline constexpr int32_t kSampleBadLogits = 1;

// One sampled row's parameters (already validated on the host, see sampler.h for meanings).
struct SampleRowParams {
  float temperature = 0.f;  // <= 0: greedy
  int32_t top_k = 0;        // 0: off
  float top_p = 1.f;        // 1: off
  float min_p = 0.f;        // 0: off
  uint64_t seed = 0;
  int32_t sample_index = 0;  // keys the counter-based draw
  int32_t logprobs = 0;      // 1: compute the chosen token's log-probability
  int32_t top_logprobs = 0;  // 0..kMaxTopLogprobs
  int32_t pad = 0;
};
static_assert(sizeof(SampleRowParams) == 40);

struct SampleRowResult {
  int32_t token_id = -1;
  float logprob = 0.f;
  int32_t status = kSampleOk;
  int32_t num_top = 0;  // entries written to the row's top list
};
static_assert(sizeof(SampleRowResult) == 16);

// The row's pre-pass (sampling.h): kSampleChunks CTAs a row each reduce one contiguous chunk of
// the vocabulary, so the passes over every logit run on many SMs instead of the row's one CTA.
inline constexpr int32_t kSampleChunks = 32;
struct SampleChunkPartial {
  float best = 0.f;     // the chunk's largest value (NaN as -inf)
  int32_t best_id = 0;  // its lowest id (INT_MAX for an empty chunk)
  double mass = 0.0;    // sum of p(x) over the chunk (0 when the row needs no probabilities)
};
static_assert(sizeof(SampleChunkPartial) == 16);

struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0.f;
};

}  // namespace pkv::gpu
