// Sampling parameters of one request, in the runtime's own types (the worker converts from
// pkv.v1.SamplingParams after validation; see proto/pkv/v1/common.proto for meanings and bounds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pkv {

struct SamplingParams {
  int32_t max_tokens = 16;
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;         // counter-based RNG key: token i draws from (seed, i)
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace pkv
