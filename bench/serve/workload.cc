#include "bench/serve/workload.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "bench/serve/rng.h"
#include "bench/serve/workload_kinds.h"

namespace pkv::serve_bench {

absl::StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& name) {
  if (name == "sharegpt") return WorkloadKind::kShareGpt;
  if (name == "multi_turn") return WorkloadKind::kMultiTurn;
  if (name == "long_doc") return WorkloadKind::kLongDoc;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", name, "'; expected sharegpt, multi_turn or long_doc"));
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kShareGpt:
      return "sharegpt";
    case WorkloadKind::kMultiTurn:
      return "multi_turn";
    case WorkloadKind::kLongDoc:
      return "long_doc";
  }
  return "?";
}

int DrawLength(const LengthDistribution& d, Rng& rng) {
  double value = d.mean;
  if (d.sigma > 0) {
    const double mu = std::log(std::max(d.mean, 1e-9)) - d.sigma * d.sigma / 2;
    value = std::exp(mu + d.sigma * rng.Normal());
  }
  const double rounded = std::round(value);
  return static_cast<int>(std::clamp(rounded, 1.0, static_cast<double>(std::max(d.max, 1))));
}

std::vector<uint32_t> DrawTokens(const WorkloadOptions& options, int n, Rng& rng) {
  std::vector<uint32_t> out;
  out.reserve(static_cast<size_t>(std::max(n, 0)));
  while (static_cast<int>(out.size()) < n) {
    const uint32_t id = static_cast<uint32_t>(rng.Below(options.vocab_size));
    const auto& eos = options.eos_token_ids;
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) out.push_back(id);
  }
  return out;
}

std::vector<uint32_t> SystemPrompt(const WorkloadOptions& options) {
  Rng rng = Rng::For(options.seed, kStreamSystemPrompt, 0);
  return DrawTokens(options, options.system_prompt_tokens, rng);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const WorkloadOptions& options) {
  if (options.vocab_size <= options.eos_token_ids.size()) {
    return absl::InvalidArgumentError("workload: vocab_size must exceed the number of EOS ids");
  }
  if (options.system_prompt_tokens < 0 || options.turns < 1 || options.num_docs < 1 ||
      options.doc_tokens < 1 || options.input.mean < 1 || options.output.mean < 1) {
    return absl::InvalidArgumentError(
        "workload: need system_prompt_tokens >= 0, turns >= 1, num_docs >= 1, doc_tokens >= 1 "
        "and input/output means >= 1");
  }
  switch (options.kind) {
    case WorkloadKind::kShareGpt:
      return MakeShareGptWorkload(options);
    case WorkloadKind::kMultiTurn:
      return MakeMultiTurnWorkload(options);
    case WorkloadKind::kLongDoc:
      return MakeLongDocWorkload(options);
  }
  return absl::InvalidArgumentError("workload: unknown kind");
}

}  // namespace pkv::serve_bench
