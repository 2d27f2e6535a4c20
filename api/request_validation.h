// Validation of a pkv.v1.GenerateRequest against the model it will run on, shared by the router
// (the front door: bad input never reaches a worker) and the worker (defence in depth).
//
// Every failure is INVALID_ARGUMENT (or FAILED_PRECONDITION when the ModelInfo itself is unusable)
// with a message naming the field, the offending value and the bound, e.g.
//   "sampling.top_p must be in (0, 1], got 1.5".
// The checks stop at the first failure, in field order (request_id, prompt, session_id, sampling).
//
// Proto-only on purpose: converting pkv.v1.SamplingParams to the runtime struct belongs to the
// worker (worker/model/sampling_params.h), so api/ depends on nothing but pkv::proto and Abseil.
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pkv/v1/common.pb.h"
#include "pkv/v1/generation.pb.h"

namespace pkv::api {

// Caps that do not come from the model. Defaults follow common.proto / generation.proto.
struct RequestLimits {
  // Prompt tokens per request when the prompt is token ids; 0 = the model's max_context - 1
  // (at least one token must be left to generate).
  uint32_t max_prompt_tokens = 0;
  // UTF-8 bytes of a text prompt (its token count is checked by the worker's tokenizer).
  uint32_t max_prompt_text_bytes = 1u << 20;
  // Messages of a chat prompt (their content bytes count against max_prompt_text_bytes).
  uint32_t max_chat_messages = 4096;
  uint32_t max_stop_strings = 16;
  uint32_t max_stop_string_bytes = 256;
  uint32_t max_stop_token_ids = 128;
  uint32_t max_top_logprobs = 20;
  uint32_t max_request_id_bytes = 128;
  uint32_t max_session_id_bytes = 256;
  // The router accepts an empty request_id (it assigns one); the worker requires it.
  bool require_request_id = false;
};

// Validates the whole request. `model` must come from a healthy worker (vocab_size and
// max_context non-zero), otherwise FAILED_PRECONDITION.
absl::Status ValidateGenerateRequest(const pkv::v1::GenerateRequest& request,
                                     const pkv::v1::ModelInfo& model, const RequestLimits& limits);

// request_id: 1..max_request_id_bytes bytes of [A-Za-z0-9_.:-] (empty allowed unless
// limits.require_request_id).
absl::Status ValidateRequestId(absl::string_view request_id, const RequestLimits& limits);

// Sampling fields alone. `prompt_tokens` is the prompt length when known (token-id prompts), or 0
// for a text prompt, whose length the worker checks after tokenizing; with 0 the context check
// only demands max_tokens <= max_context - 1.
absl::Status ValidateSamplingParams(const pkv::v1::SamplingParams& sampling,
                                    const pkv::v1::ModelInfo& model, uint32_t prompt_tokens,
                                    const RequestLimits& limits);

// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool IsValidUtf8(absl::string_view text);

}  // namespace pkv::api
