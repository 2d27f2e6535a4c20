// `pkv-bench e2e --drift_prompts N`: how far a configuration's log-probabilities move from a
// reference configuration of the same random model (e.g. FP8 KV against bf16 KV). Each of N random
// prompts is prefilled and continued greedily; per generated position the chosen token's
// log-probability is recorded. The compared run is teacher-forced: it is fed the reference's
// tokens, and reports its log-probability of each reference token (from its top log-probabilities)
// and whether its own greedy choice agreed. A random model's top logits are nearly tied, so free
// running would diverge at once and leave little to compare.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cuda_backend/cuda_backend.h"

namespace pkv::bench {

struct GreedyTrace {
  std::vector<std::vector<int32_t>> tokens;  // [prompt][position]
  std::vector<std::vector<float>> logprobs;  // [prompt][position]
};

struct DriftOptions {
  int32_t prompts = 4;
  int32_t prompt_len = 1024;
  int32_t gen_tokens = 32;
  uint32_t seed = 17;  // the prompts' tokens (the same seed gives the same prompts)
};

// forced: nullptr (greedy), or the reference trace whose tokens are fed; then `logprobs` holds this
// run's log-probability of each forced token (NaN when it is not among its top 20) and `tokens`
// this run's own greedy choices.
absl::StatusOr<GreedyTrace> RunGreedyTrace(CudaModelBackend* backend, const DriftOptions& o,
                                           const GreedyTrace* forced);

struct Drift {
  double max_abs = 0;    // nats, over compared positions
  double mean_abs = 0;   // nats
  int32_t compared = 0;  // positions whose forced token was in the run's top 20
  int32_t total = 0;
  int32_t greedy_equal = 0;  // positions where the run's own greedy choice was the reference's
};

// got: RunGreedyTrace teacher-forced by `reference`.
Drift CompareTraces(const GreedyTrace& reference, const GreedyTrace& got);

}  // namespace pkv::bench
