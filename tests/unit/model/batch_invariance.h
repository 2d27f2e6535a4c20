// A backend-agnostic check of batch invariance (the CUDA backend's deterministic mode; the CPU
// backend by construction): a few sequences are run through a ModelBackend in different batch
// mixes, and each sequence's per-step outputs are compared with what it produced alone.
//
// Mixes (MixKind):
//   kAlone       each sequence by itself: its prompt in one chunk, then one decode row a step;
//   kTogether    every prompt in one step, then every sequence decoding in one step (rows in
//                reverse order, so each row sits at another batch index than before);
//   kChunked     two sequences prefilled together and decoding while the other prompts are fed
//                in chunks mixed into the same steps (one of them with a one-token chunk in the
//                middle of its prompt: a row the CUDA backend classifies as a decode row);
//   kRecompute   each sequence alone, but half-way its whole history (prompt and generated
//                tokens) is fed again as one prefill chunk from position 0, as a worker does for a
//                migrated or preempted stream, then decoding resumes.
// Outputs per sequence and step (Record): with Forward, the logits row (bitwise comparable) and
// its host argmax as the next token; with Step, the sampled token, its log-probability and the
// top log-probabilities.
// Thread-safety: plain functions over the caller's backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/model_backend.h"

namespace pkv::testing {

enum class MixKind { kAlone, kTogether, kChunked, kRecompute };
const char* MixName(MixKind kind);

struct InvarianceSeq {
  std::vector<int32_t> prompt;  // >= 2 tokens
  std::vector<int32_t> pages;   // block table for prompt + steps tokens; no page shared
};

struct InvarianceOptions {
  int32_t steps = 12;       // records per sequence (the first comes from the prompt)
  bool use_forward = true;  // Forward (logits) or Step (sampled tokens)
  SamplingParams params;    // Step only; the seed is offset by the sequence's index
};

struct Record {
  int32_t token = 0;
  std::vector<float> logits;  // Forward only
  float logprob = 0.f;        // Step only
  std::vector<TopLogprobEntry> top;
};
using SeqRecords = std::vector<std::vector<Record>>;  // [seq][step]

// Runs `seqs` through `backend` in the mix. Every sequence's KV is written from position 0 before
// it is read, so mixes may reuse the same pages.
absl::StatusOr<SeqRecords> RunMix(ModelBackend* backend, const std::vector<InvarianceSeq>& seqs,
                                  MixKind kind, const InvarianceOptions& options);

// First difference of `got` from `ref` for one sequence: step index, or -1 when every record is
// bitwise equal (tokens, logits, log-probabilities). `what` says what differed.
int32_t FirstDifference(const std::vector<Record>& ref, const std::vector<Record>& got,
                        std::string* what);

}  // namespace pkv::testing
