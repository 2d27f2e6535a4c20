#include "bench/e2e/e2e_drift.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::bench {
namespace {
constexpr int32_t kTopLogprobs = 20;
}  // namespace

absl::StatusOr<GreedyTrace> RunGreedyTrace(CudaModelBackend* backend, const DriftOptions& o,
                                           const GreedyTrace* forced) {
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
  greedy.top_logprobs = kTopLogprobs;
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
      const SampleResult& s = samples[0];
      out_tokens.push_back(s.token_id);
      if (forced == nullptr) {
        tokens.push_back(s.token_id);
        out_logprobs.push_back(s.logprob);
      } else {
        const int32_t want = forced->tokens[p][g];
        tokens.push_back(want);
        float lp = std::numeric_limits<float>::quiet_NaN();
        for (const TopLogprobEntry& e : s.top) lp = e.token_id == want ? e.logprob : lp;
        out_logprobs.push_back(lp);
      }
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
    for (size_t i = 0; i < reference.tokens[p].size() && i < got.tokens[p].size(); ++i) {
      ++d.total;
      if (got.tokens[p][i] == reference.tokens[p][i]) ++d.greedy_equal;
      const float lp = got.logprobs[p][i];
      if (std::isnan(lp)) continue;
      const double diff = std::abs(double{lp} - reference.logprobs[p][i]);
      d.max_abs = std::max(d.max_abs, diff);
      sum += diff;
      ++d.compared;
    }
  }
  d.mean_abs = d.compared > 0 ? sum / d.compared : 0;
  return d;
}

}  // namespace pkv::bench
