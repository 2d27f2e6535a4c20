// The interface between the engine loop and a model runtime (CPU now, CUDA later). A backend owns
// the weights and the KV-cache storage for `num_kv_pages()` pages of `page_size()` tokens; which
// page belongs to which sequence is decided by the scheduler's page pool and passed in per step.
//
// One Step() runs a mixed batch: decode rows feed 1 token, prefill rows feed a chunk. For every fed
// token the backend writes its K/V into the row's pages at position start_pos + i, then computes
// attention over positions 0..start_pos+i. Rows with `sample` set get their next token sampled from
// the logits of their last fed token.
//
// Step pipelining: Launch() starts a batch and returns, Finish() waits for the oldest launched
// batch and hands back its samples, so the host can build and launch step N+1 while step N runs
// on the device (the host's per-step work off the critical path). A row of step N+1 may feed, as
// its one token, a token step N samples and the host has not seen yet (BatchRow::feedback).
//
// Thread-safety: not thread-safe; owned and called by the worker's scheduler thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/attention/fp8_kv.h"
#include "worker/model/model_config.h"
#include "worker/model/sampling_params.h"

namespace pkv {

struct BatchRow {
  const int32_t* tokens = nullptr;         // [num_tokens] token ids to feed
  int32_t num_tokens = 0;                  // >= 1
  int32_t start_pos = 0;                   // tokens of this row already in the KV cache
  const int32_t* pages = nullptr;          // [num_pages] the row's block table
  int32_t num_pages = 0;                   // >= ceil((start_pos + num_tokens) / page_size)
  bool sample = false;                     // sample a token after the last fed token
  const SamplingParams* params = nullptr;  // REQUIRES: set when sample
  int32_t sample_index = 0;                // index of the token being sampled within the generation
                                           // (0 = first generated token); keys the seeded RNG
  uint64_t sequence_id = 0;  // the engine's id of the row's sequence, stable over its steps; for
                             // wrappers that follow sequences (fault_injecting_backend.h)
  // Launch() only: >= 0 when the row's one token (num_tokens == 1) is sample number `feedback`
  // (in row order) of the batch launched just before this one, which may not have finished;
  // `tokens` is then not read. -1: the token is tokens[0].
  int32_t feedback = -1;
};

struct TopLogprobEntry {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;              // when params->logprobs
  std::vector<TopLogprobEntry> top;  // params->top_logprobs entries, most likely first
};

// What the last Step() did, for metrics (route labels follow DESIGN.md; the CPU backend reports
// route "cpu-reference").
struct StepStats {
  std::string decode_route;
  int32_t decode_launches = 0;
  double decode_split_occupancy = 1.0;
  int32_t num_decode_rows = 0;
  int32_t num_prefill_tokens = 0;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;

  virtual const ModelConfig& config() const = 0;
  virtual int32_t page_size() const = 0;
  virtual int64_t num_kv_pages() const = 0;
  virtual std::string backend_name() const = 0;  // "cpu" or "cuda"
  virtual std::string dtype_name() const = 0;    // "float32", "float16", "bfloat16"
  // What the KV pages store: kAuto (dtype_name()) or an FP8 format (kernels/attention/fp8_kv.h).
  virtual KvCacheDtype kv_cache_dtype() const { return KvCacheDtype::kAuto; }
  // Whether a row's logits are a function of its own tokens only, whatever else shares the step
  // (the CPU backend always; the CUDA backend in deterministic mode). ModelInfo reports it.
  virtual bool batch_invariant() const { return false; }

  // Runs the batch and appends one SampleResult per row with `sample` set, in row order.
  // On error the KV written by this step is unspecified; the caller fails the whole batch.
  virtual absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                            StepStats* stats) = 0;

  // Runs the batch without sampling and writes the final-position logits of each row with `sample`
  // set into logits[i * vocab_size ...] (float32). For tests and cross-backend checks.
  virtual absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) = 0;

  // Step pipelining (see the top of this file). Launch() starts `rows` (stats describe it) and
  // Finish() appends the samples of the oldest launched, unfinished batch, in row order. At most
  // kMaxLaunched batches are launched and unfinished; Step() and Forward() require none. On an
  // error from either, the caller fails every request and launches nothing more.
  // The default runs Step() inside Launch(), resolving feedback rows from the previous batch's
  // samples (same results, no overlap); backends that overlap override all three of these.
  static constexpr int kMaxLaunched = 2;
  virtual absl::Status Launch(absl::Span<const BatchRow> rows, StepStats* stats);
  virtual absl::Status Finish(std::vector<SampleResult>* samples);
  // Whether Launch() returns before the batch has run (false for the default).
  virtual bool overlaps_steps() const { return false; }

 private:
  // The default Launch/Finish: samples of launched, unfinished batches (oldest first), and the
  // token ids the latest launched batch sampled (what the next batch's feedback rows feed).
  std::deque<std::vector<SampleResult>> launched_;
  std::vector<int32_t> latest_tokens_;
  std::vector<BatchRow> resolved_rows_;
  std::vector<int32_t> resolved_tokens_;
};

// OK when every feedback row of `rows` names one of the `previous_samples` samples of the batch
// launched before and feeds one token; else INVALID_ARGUMENT naming the row.
absl::Status ValidateFeedbackRows(absl::Span<const BatchRow> rows, int32_t previous_samples);

}  // namespace pkv
