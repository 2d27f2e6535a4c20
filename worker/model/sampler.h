// Next-token sampling from one row of logits: a pure function of (logits, params, sample_index),
// so token i of a request is reproducible and a request can resume on another worker carrying no
// RNG state. Every backend (CPU now, CUDA later) must give the same token for the same inputs.
//
// Greedy (temperature <= 0): the arg max, ties to the lowest token id.
//
// Sampled (temperature > 0), in this order:
//   1. z = logits / temperature;  p = softmax(z) over the whole vocabulary.
//   2. top_k (0 = off): keep the k tokens with the largest z (ties: lower id ranks first).
//   3. top_p (1 = off): among the kept tokens ranked by z, keep the shortest prefix whose
//      probability mass is >= top_p of the kept mass (always at least the first token).
//   4. min_p (0 = off): drop kept tokens with p < min_p * p_max (the top token always survives).
//   5. Draw: u = CounterUniform(seed, sample_index) in [0, 1); walk the kept tokens in ascending
//      id order accumulating p and pick the first whose running sum exceeds u * (kept mass).
//      Walking in id order makes the pick independent of how the kept set was found.
// Non-finite logits: NaN counts as -inf; a row whose logits are all -inf/NaN is INVALID_ARGUMENT.
//
// CounterUniform(seed, i): the SplitMix64 stream keyed by seed, at position i:
//   key = Mix64(seed);  r = Mix64(key + (i + 1) * 0x9E3779B97F4A7C15);  u = (r >> 11) * 2^-53,
// with Mix64(z) the SplitMix64 finaliser (z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
// z *= 0x94D049BB133111EB; z ^= z >> 31). Different seeds give unrelated streams.
//
// Log-probabilities (natural log): of the temperature-scaled logits z (raw logits when greedy),
// over the whole vocabulary, before any top-k/top-p/min-p filtering: logprob(t) = z_t -
// logsumexp(z). With params.logprobs, result->logprob is the chosen token's; with top_logprobs = N
// > 0, result->top holds the N most likely tokens (ties: lower id first), most likely first.
//
// Thread-safety: pure; a SamplerScratch must not be shared between concurrent calls.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/model/model_backend.h"
#include "worker/model/sampling_params.h"

namespace pkv {

// Reusable buffers so a decode step allocates nothing once warmed up.
struct SamplerScratch {
  std::vector<int32_t> order;  // [vocab] candidate ids
  std::vector<double> probs;   // [vocab] exp(z - max z)
};

uint64_t Mix64(uint64_t z);
// Uniform in [0, 1) from (seed, index); see the header comment for the exact formula.
double CounterUniform(uint64_t seed, uint64_t index);

// INVALID_ARGUMENT for out-of-range params (temperature not finite, top_p not in (0, 1], min_p
// not in [0, 1], negative top_k or top_logprobs). Every backend's sampler checks this first.
absl::Status ValidateSamplingParams(const SamplingParams& params);

// Samples one token. INVALID_ARGUMENT on empty or all-NaN/-inf logits, or on out-of-range params
// (temperature NaN, top_p not in (0, 1], min_p not in [0, 1], negative top_k or top_logprobs).
// `scratch` may be nullptr (buffers are then allocated per call).
absl::Status SampleToken(absl::Span<const float> logits, const SamplingParams& params,
                         int64_t sample_index, SampleResult* result,
                         SamplerScratch* scratch = nullptr);

}  // namespace pkv
