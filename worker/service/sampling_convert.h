// Conversion of validated pkv.v1 request fields into the runtime's types, and the prompt checks
// that need the tokenized prompt (so they cannot run in the router for text prompts).
#pragma once

#include "pkv/v1/common.pb.h"
#include "worker/model/sampling_params.h"

namespace pkv {

// REQUIRES: `proto` passed request validation. An unset seed draws a random one (the request is
// then not reproducible, as documented in common.proto).
SamplingParams ConvertSamplingParams(const pkv::v1::SamplingParams& proto);

}  // namespace pkv
