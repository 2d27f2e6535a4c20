// `pkv-bench e2e --drift_prompts N`: how far a configuration's log-probabilities move from a
// reference configuration of the same random model (e.g. FP8 KV against bf16 KV). Each of N random
// prompts is prefilled and continued greedily; per generated position the chosen token's
// log-probability is recorded. Two runs are compared position by position while their tokens agree
// (after a divergence the contexts differ), as the CPU integration test does
// (tests/integration/fp8_kv_cache_test.cc).
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

absl::StatusOr<GreedyTrace> RunGreedyTrace(CudaModelBackend* backend, const DriftOptions& o);

struct Drift {
  double max_abs = 0;   // nats, over compared positions
  double mean_abs = 0;  // nats
  int32_t compared = 0;
  int32_t total = 0;
  int32_t first_tokens_equal = 0;  // prompts whose first generated token agrees
};

Drift CompareTraces(const GreedyTrace& reference, const GreedyTrace& got);

}  // namespace pkv::bench
