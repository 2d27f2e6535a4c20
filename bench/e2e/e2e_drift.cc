#include "bench/e2e/e2e_drift.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::bench {

absl::StatusOr<GreedyTrace> RunGreedyTrace(CudaModelBackend* backend, const DriftOptions& o) {
  const int32_t ps = backend->page_size();
  const int32_t len = o.prompt_len + o.gen_tokens;
  const int32_t pages_per_row = (len + ps - 1) / ps;
  if (int64_t{pages_per_row} * o.prompts > backend->num_kv_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("drift: needs ", pages_per_row * o.prompts,
                                                     " KV pages, the pool has ",
                                                     backend->num_kv_pages()));
  }
  std::mt19937 rng(o.seed);
  const int32_t vocab = backend->config().vocab_size;
  SamplingParams greedy;
  greedy.temperature = 0.f;
  greedy.logprobs = true;
  GreedyTrace trace;
  // One prompt at a time: its rows never share a step, so only the KV dtype differs between runs.
  for (int32_t p = 0; p < o.prompts; ++p) {
    std::vector<int32_t> tokens(o.prompt_len);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % (vocab - 2));
    std::vector<int32_t> pages(pages_per_row);
    std::iota(pages.begin(), pages.end(), p * pages_per_row);
    std::vector<int32_t> out_tokens;
    std::vector<float> out_logprobs;
    int32_t fed = 0;
    for (int32_t g = 0; g < o.gen_tokens; ++g) {
      BatchRow row;
      row.tokens = tokens.data() + fed;
      row.num_tokens = static_cast<int32_t>(tokens.size()) - fed;
      row.start_pos = fed;
      row.pages = pages.data();
      row.num_pages = pages_per_row;
      row.sample = true;
      row.params = &greedy;
      row.sample_index = g;
      row.sequence_id = static_cast<uint64_t>(p + 1);
      std::vector<SampleResult> samples;
      PKV_RETURN_IF_ERROR(backend->Step({&row, 1}, &samples, nullptr));
      if (samples.size() != 1) return absl::InternalError("drift: one sample expected");
      fed = static_cast<int32_t>(tokens.size());
      tokens.push_back(samples[0].token_id);
      out_tokens.push_back(samples[0].token_id);
      out_logprobs.push_back(samples[0].logprob);
    }
    trace.tokens.push_back(std::move(out_tokens));
    trace.logprobs.push_back(std::move(out_logprobs));
  }
  return trace;
}

Drift CompareTraces(const GreedyTrace& reference, const GreedyTrace& got) {
  Drift d;
  double sum = 0;
  for (size_t p = 0; p < reference.tokens.size() && p < got.tokens.size(); ++p) {
    const auto& rt = reference.tokens[p];
    const auto& gt = got.tokens[p];
    d.total += static_cast<int32_t>(rt.size());
    if (!rt.empty() && !gt.empty() && rt[0] == gt[0]) ++d.first_tokens_equal;
    for (size_t i = 0; i < rt.size() && i < gt.size(); ++i) {
      const double diff = std::abs(double{got.logprobs[p][i]} - reference.logprobs[p][i]);
      d.max_abs = std::max(d.max_abs, diff);
      sum += diff;
      ++d.compared;
      if (rt[i] != gt[i]) break;  // later positions have different contexts
    }
  }
  d.mean_abs = d.compared > 0 ? sum / d.compared : 0;
  return d;
}

}  // namespace pkv::bench
