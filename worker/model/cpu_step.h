// The part of ModelBackend::Step that every host-side backend shares once its logits are computed:
// sampling the rows that asked for a token, and the step's statistics. Used by the single-rank and
// the tensor-parallel CPU backends. Not thread-safe (the scratch buffer is the caller's).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/model/model_backend.h"
#include "worker/model/sampler.h"

namespace pkv {

// Samples one token for every row with `sample` set, in row order, from
// logits[k * vocab_size ...] (k-th sampling row) and appends the results to `samples`.
absl::Status SampleRows(absl::Span<const BatchRow> rows, const std::vector<float>& logits,
                        int64_t vocab_size, SamplerScratch* scratch,
                        std::vector<SampleResult>* samples);

// StepStats of a host backend: route "cpu-reference", no kernel launches; a row feeding one token
// after a non-empty prefix counts as decode, everything else as prefill tokens.
StepStats CpuStepStats(absl::Span<const BatchRow> rows);

}  // namespace pkv
