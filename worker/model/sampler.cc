#include "worker/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace pkv {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Ranking of candidates: larger z first, lower id on ties.
struct ByScoreThenId {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    const float za = std::isnan(logits[a]) ? -std::numeric_limits<float>::infinity() : logits[a];
    const float zb = std::isnan(logits[b]) ? -std::numeric_limits<float>::infinity() : logits[b];
    return za > zb || (za == zb && a < b);
  }
};

// Leaves the kept candidates of steps 2-4 in scratch->order, in ascending id order.
void KeepCandidates(absl::Span<const float> logits, const SamplingParams& params,
                    SamplerScratch* s) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  const std::vector<double>& probs = s->probs;
  std::vector<int32_t>& order = s->order;
  const bool use_k = params.top_k > 0 && params.top_k < vocab;
  if (!use_k && params.top_p >= 1.0f) {  // no ranking needed: only min_p filters
    order.clear();
    for (int32_t i = 0; i < vocab; ++i) {
      if (probs[i] > 0.0 && probs[i] >= params.min_p) order.push_back(i);
    }
    return;
  }
  order.resize(vocab);
  std::iota(order.begin(), order.end(), 0);
  // Ranking by logit equals ranking by z = logit / temperature (temperature > 0).
  const ByScoreThenId cmp{logits.data()};
  int32_t n = vocab;
  if (use_k) {
    n = params.top_k;
    std::partial_sort(order.begin(), order.begin() + n, order.end(), cmp);
  } else {
    std::sort(order.begin(), order.end(), cmp);
  }
  if (params.top_p < 1.0f) {
    double mass = 0.0;
    for (int32_t j = 0; j < n; ++j) mass += probs[order[j]];
    double cum = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      cum += probs[order[j]];
      if (cum >= params.top_p * mass) {
        n = j + 1;
        break;
      }
    }
  }
  for (int32_t j = 1; j < n; ++j) {  // sorted by probability: cut at the first one below min_p
    if (probs[order[j]] < params.min_p) {
      n = j;
      break;
    }
  }
  order.resize(n);
  std::sort(order.begin(), order.end());
}

int32_t Draw(const SamplingParams& params, int64_t sample_index, const SamplerScratch& s) {
  double mass = 0.0;
  for (int32_t id : s.order) mass += s.probs[id];
  const double target = CounterUniform(params.seed, static_cast<uint64_t>(sample_index)) * mass;
  double cum = 0.0;
  for (int32_t id : s.order) {
    cum += s.probs[id];
    if (cum > target) return id;
  }
  // Rounding left target at the very top: take the last kept token with mass.
  for (auto it = s.order.rbegin(); it != s.order.rend(); ++it) {
    if (s.probs[*it] > 0.0) return *it;
  }
  return s.order.front();
}

void FillTopLogprobs(absl::Span<const float> logits, int32_t n, double inv_t, double log_z,
                     SamplerScratch* s, SampleResult* result) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  n = std::min(n, vocab);
  s->order.resize(vocab);
  std::iota(s->order.begin(), s->order.end(), 0);
  std::partial_sort(s->order.begin(), s->order.begin() + n, s->order.end(),
                    ByScoreThenId{logits.data()});
  for (int32_t j = 0; j < n; ++j) {
    const int32_t id = s->order[j];
    const double z = std::isnan(logits[id]) ? kNegInf : logits[id] * inv_t;
    result->top.push_back({id, static_cast<float>(z - log_z)});
  }
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  if (std::isnan(p.temperature) || std::isinf(p.temperature)) {
    return absl::InvalidArgumentError("sampling: temperature must be finite");
  }
  if (p.top_k < 0) return absl::InvalidArgumentError("sampling: top_k must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError("sampling: top_p must be in (0, 1]");
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return absl::InvalidArgumentError("sampling: min_p must be in [0, 1]");
  }
  if (p.top_logprobs < 0) return absl::InvalidArgumentError("sampling: top_logprobs must be >= 0");
  return absl::OkStatus();
}

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double CounterUniform(uint64_t seed, uint64_t index) {
  const uint64_t key = Mix64(seed);
  const uint64_t r = Mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

absl::Status SampleToken(absl::Span<const float> logits, const SamplingParams& params,
                         int64_t sample_index, SampleResult* result, SamplerScratch* scratch) {
  if (logits.empty()) return absl::InvalidArgumentError("sampling: empty logits");
  absl::Status st = ValidateSamplingParams(params);
  if (!st.ok()) return st;
  SamplerScratch local;
  SamplerScratch* s = scratch ? scratch : &local;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  const bool greedy = params.greedy();
  const double inv_t = greedy ? 1.0 : 1.0 / static_cast<double>(params.temperature);

  // Arg max (strictly greater keeps the lowest id on ties) and exp(z - max z).
  int32_t argmax = -1;
  double zmax = kNegInf;
  for (int32_t i = 0; i < vocab; ++i) {
    const double z = std::isnan(logits[i]) ? kNegInf : logits[i] * inv_t;
    if (z > zmax) {
      zmax = z;
      argmax = i;
    }
  }
  if (argmax < 0 || std::isinf(zmax)) {
    return absl::InvalidArgumentError("sampling: logits are all -inf or NaN");
  }
  s->probs.resize(vocab);
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) {
    const double z = std::isnan(logits[i]) ? kNegInf : logits[i] * inv_t;
    s->probs[i] = std::exp(z - zmax);
    sum += s->probs[i];
  }
  const double log_z = zmax + std::log(sum);

  int32_t chosen = argmax;
  if (!greedy) {
    KeepCandidates(logits, params, s);
    chosen = s->order.empty() ? argmax : Draw(params, sample_index, *s);
  }
  result->token_id = chosen;
  result->logprob = 0.0f;
  result->top.clear();
  if (params.logprobs) {
    result->logprob = static_cast<float>(logits[chosen] * inv_t - log_z);
    if (params.top_logprobs > 0)
      FillTopLogprobs(logits, params.top_logprobs, inv_t, log_z, s, result);
  }
  return absl::OkStatus();
}

}  // namespace pkv
