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
  float best = 0.f;       // the chunk's largest value (NaN as -inf)
  int32_t best_id = 0;    // its lowest id (INT_MAX for an empty chunk)
  double mass = 0.0;      // sum of p(x) over the chunk (0 when the row needs no probabilities)
  float lo = 0.f;         // the chunk's smallest finite value (+inf when it has none)
  int32_t num_min_p = 0;  // filtered rows: tokens with p(x) >= min_p
  double above = 0.0;     // filtered rows: mass of the tokens ranked above the plan's candidates
};
static_assert(sizeof(SampleChunkPartial) == 32);

// The filtered draw (top-k / top-p / min-p): a value histogram of kSampleBins bins a chunk (bin 0
// holds the row's max; the last bin every finite value below the binned range), combined by a
// plan kernel that picks the bins where the kept prefix must end; their tokens ("candidates", at
// most kMaxSampleCandidates a row, in id order) are compacted so the row's CTA resolves the cut
// among them instead of searching the whole row.
inline constexpr int32_t kSampleBins = 256;
inline constexpr int32_t kMaxSampleCandidates = 4096;
struct SampleHistBin {
  int32_t count = 0;
  float mass = 0.f;  // float: it only locates the cut (the plan keeps a margin); exact sums later
};
struct SampleCandidate {
  float value = 0.f;
  int32_t id = 0;
};
inline constexpr int32_t kSamplePlanNone = 0;        // greedy or unfiltered row
inline constexpr int32_t kSamplePlanCandidates = 1;  // the cut lies among the compacted bins
inline constexpr int32_t kSamplePlanFullRow = 2;     // too many candidates: search the whole row
inline constexpr int32_t kSampleFilterTopK =
    1;  // SamplePlan::filters: those that cut finite tokens
inline constexpr int32_t kSampleFilterTopP = 2;
inline constexpr int32_t kSampleFilterMinP = 4;
struct SamplePlan {
  int32_t mode = kSamplePlanNone;
  int32_t filters = 0;             // kSampleFilter* bits
  int32_t lo_bin = 0, hi_bin = 0;  // the candidate bins [lo_bin, hi_bin]
  int32_t num_above = 0;           // finite tokens in bins < lo_bin (all of them kept)
  int32_t num_min_p = 0;           // the row's tokens with p(x) >= min_p (min_p > 0)
  int32_t mismatch = 0;            // set by the compaction when a chunk's count differs
  int32_t cand_indptr[kSampleChunks + 1] = {};  // chunk c's candidates: [indptr[c], indptr[c+1])
};

// The sampler's workspace: byte offsets of its parts (each 16-byte aligned) and its size, from one
// function, so the backend's allocation and the kernels' view of it cannot drift apart:
//   partials    SampleChunkPartial [max_rows][kSampleChunks]
//   hist        SampleHistBin      [max_rows][kSampleChunks][kSampleBins]
//   plans       SamplePlan         [max_rows]
//   candidates  SampleCandidate    [max_rows][kMaxSampleCandidates]
struct SampleWorkspaceLayout {
  int64_t partials = 0, hist = 0, plans = 0, candidates = 0, bytes = 0;
};
constexpr int64_t SampleAlign16(int64_t n) { return (n + 15) / 16 * 16; }
constexpr SampleWorkspaceLayout SampleWorkspaceLayoutFor(int32_t max_rows) {
  const int64_t r = max_rows;
  SampleWorkspaceLayout l;
  l.hist = l.partials + SampleAlign16(r * kSampleChunks * int64_t{sizeof(SampleChunkPartial)});
  l.plans =
      l.hist + SampleAlign16(r * kSampleChunks * kSampleBins * int64_t{sizeof(SampleHistBin)});
  l.candidates = l.plans + SampleAlign16(r * int64_t{sizeof(SamplePlan)});
  l.bytes =
      l.candidates + SampleAlign16(r * kMaxSampleCandidates * int64_t{sizeof(SampleCandidate)});
  return l;
}
constexpr int64_t SampleWorkspaceBytes(int32_t max_rows) {
  return SampleWorkspaceLayoutFor(max_rows).bytes;
}

struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0.f;
};

}  // namespace pkv::gpu
