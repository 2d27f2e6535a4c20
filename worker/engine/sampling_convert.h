// Conversion of validated pkv.v1 request fields into the runtime's types, and the prompt checks
// that need the tokenized prompt (so they cannot run in the router for text prompts).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pkv/v1/common.pb.h"
#include "pkv/v1/worker.pb.h"
#include "worker/model/sampling_params.h"

namespace pkv {

// REQUIRES: `proto` passed request validation. An unset seed draws a random one (the request is
// then not reproducible, as documented in common.proto).
SamplingParams ConvertSamplingParams(const pkv::v1::SamplingParams& proto);

// Checks a tokenized prompt (+ resumed tokens) against the model: ids in vocabulary, length within
// the context together with max_tokens. INVALID_ARGUMENT with both numbers otherwise. Returns the
// max_tokens to run with: the request's, lowered to what the context leaves when it asks for
// clamp_max_tokens (a prompt that fills the context leaves 0, which is refused).
absl::StatusOr<int32_t> ValidateResolvedPrompt(const std::vector<int32_t>& prompt,
                                               const pkv::v1::WorkerGenerateRequest& request,
                                               const pkv::v1::ModelInfo& info);

}  // namespace pkv
