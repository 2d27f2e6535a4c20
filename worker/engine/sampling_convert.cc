#include "worker/engine/sampling_convert.h"

#include <algorithm>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace pkv {

SamplingParams ConvertSamplingParams(const pkv::v1::SamplingParams& proto) {
  SamplingParams p;
  p.max_tokens = static_cast<int32_t>(proto.max_tokens());
  p.temperature = proto.has_temperature() ? proto.temperature() : 1.0f;
  p.top_k = static_cast<int32_t>(proto.top_k());
  p.top_p = proto.has_top_p() ? proto.top_p() : 1.0f;
  p.min_p = proto.min_p();
  if (proto.has_seed()) {
    p.seed = proto.seed();
  } else {
    thread_local absl::BitGen gen;
    p.seed = absl::Uniform<uint64_t>(gen);
  }
  for (uint32_t id : proto.stop_token_ids()) p.stop_token_ids.push_back(static_cast<int32_t>(id));
  for (const std::string& s : proto.stop()) p.stop.push_back(s);
  p.ignore_eos = proto.ignore_eos();
  p.logprobs = proto.logprobs();
  p.top_logprobs = static_cast<int32_t>(proto.top_logprobs());
  return p;
}

absl::StatusOr<int32_t> ValidateResolvedPrompt(const std::vector<int32_t>& prompt,
                                               const pkv::v1::WorkerGenerateRequest& request,
                                               const pkv::v1::ModelInfo& info) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  if (request.max_prompt_tokens() > 0 && prompt.size() > request.max_prompt_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("text prompt has ", prompt.size(),
                                                   " tokens, more than the limit of ",
                                                   request.max_prompt_tokens(), " prompt tokens"));
  }
  const int64_t vocab = info.vocab_size();
  for (int32_t id : request.resume_token_ids()) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("resume_token_ids: token id ", id, " out of vocabulary (size ", vocab, ")"));
    }
  }
  if (request.resume_token_ids_size() > 0 &&
      request.request().prompt_case() != pkv::v1::GenerateRequest::kTokenIds) {
    return absl::InvalidArgumentError("resume_token_ids require the prompt as token ids");
  }
  const int64_t resumed = request.resume_token_ids_size();
  int64_t max_tokens = request.request().sampling().max_tokens();
  if (request.request().sampling().clamp_max_tokens()) {
    max_tokens = std::min<int64_t>(
        max_tokens, static_cast<int64_t>(info.max_context()) - static_cast<int64_t>(prompt.size()));
    if (max_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("the prompt (", prompt.size(), " tokens) fills the model's context of ",
                       info.max_context(), " tokens: no room left to generate"));
    }
  }
  if (resumed >= max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resume_token_ids (", resumed, ") already reach max_tokens (", max_tokens, ")"));
  }
  const int64_t total = static_cast<int64_t>(prompt.size()) + max_tokens;
  if (total > info.max_context()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt (", prompt.size(), " tokens) + max_tokens (", max_tokens,
                     ") exceeds the model's context of ", info.max_context(), " tokens"));
  }
  return static_cast<int32_t>(max_tokens);
}

}  // namespace pkv
