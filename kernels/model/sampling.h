// Next-token sampling on the GPU: one CTA per sampled row reads the row's float32 logits and
// writes the chosen id (+ log-probabilities), so only those few bytes travel back to the host.
//
// The rule is the CPU sampler's, exactly (worker/model/sampler.h is the specification and the
// oracle): greedy = arg max with ties to the lowest id; otherwise temperature, then top-k, top-p
// and min-p over the ranking (larger logit first, lower id on ties), then the draw
// u = CounterUniform(seed, sample_index) walking the kept tokens in ascending id order. The kept
// set is always a prefix of that ranking, so the kernel finds its length n and the cut element
// (value v, id c) without sorting: a refining histogram search over the logit values (256 bins
// between the current lowest and highest candidate, about four passes over the row for float
// logits) followed by an id-ordered scan among the tokens equal to v. Probabilities and their sums
// are in double like the CPU's; only the summation order differs, so a choice can differ from the
// CPU's only when u * mass or top_p * mass lands within rounding (~1e-16 relative) of a boundary.
//
// Work layout: two pre-pass kernels of kSampleChunks CTAs a row (arg max per chunk, then each
// chunk's probability mass once the row's max is known) and the row's CTA, which takes the arg
// max and the total mass from those partials. Without top-k / top-p / min-p (the OpenAI default)
// the draw finds its chunk from the chunk masses and walks only that chunk in id order.
// Filtered rows (top-k / top-p / min-p) also build, in the mass pre-pass, a per-chunk histogram of
// kSampleBins value bins (count and float mass) below the row's max; a plan kernel (one CTA a row)
// sums the chunks' histograms in a fixed order and picks the bins [lo, hi] in which the kept
// prefix must end (counts are exact; the float masses get a 1e-3 relative margin); a compaction
// kernel (kSampleChunks CTAs a row) copies those bins' tokens in id order and sums, in double, the
// mass of every token ranked above them. The row's CTA then finds the cut among <=
// kMaxSampleCandidates candidates with the same searches as before, checks with the exact sums
// that the cut does lie among them, takes each chunk's kept mass (above + kept candidates) to pick
// the draw's chunk and walks that chunk only. When the candidates would not fit, or the check
// fails, it searches the whole row as it used to (same rule, slower).
// Log-probabilities: of the temperature-scaled logits (raw when greedy), before filtering, natural
// log; top_logprobs (<= kMaxTopLogprobs) most likely first, ties to the lower id.
// A row whose logits are all -inf/NaN (or has a +inf) gets status kSampleBadLogits and token -1.
// Thread-safety: the launcher is a pure function of its arguments; graph-capturable (the number of
// rows is read from device memory).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/model/sampling_types.h"

namespace pkv::gpu {

struct SampleArgs {
  const float* logits = nullptr;  // [max_rows][vocab]
  int32_t vocab = 0;
  const SampleRowParams* params = nullptr;  // [max_rows]
  const int32_t* num_rows = nullptr;        // device scalar: rows to sample, <= max_rows
  int32_t max_rows = 0;                     // grid size (CTAs beyond *num_rows exit)
  SampleRowResult* results = nullptr;       // [max_rows]
  TopLogprob* top = nullptr;                // [max_rows][kMaxTopLogprobs]
  void* workspace = nullptr;                // [SampleWorkspaceBytes(max_rows)] scratch, 16-aligned
};

absl::Status LaunchSample(const SampleArgs& args, cudaStream_t stream);

}  // namespace pkv::gpu
