#include "bench/serve/arrival.h"

#include "absl/strings/str_cat.h"

namespace pkv::serve_bench {

absl::StatusOr<ArrivalKind> ParseArrivalKind(const std::string& name) {
  if (name == "poisson") return ArrivalKind::kPoisson;
  if (name == "constant") return ArrivalKind::kConstant;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown arrival '", name, "'; expected poisson or constant"));
}

const char* ArrivalKindName(ArrivalKind kind) {
  return kind == ArrivalKind::kPoisson ? "poisson" : "constant";
}

ArrivalProcess::ArrivalProcess(ArrivalKind kind, double rate, uint64_t seed)
    : kind_(kind), rate_(rate), rng_(Rng::For(seed, /*stream=*/5, 0)) {}

double ArrivalProcess::NextGapSeconds() {
  if (kind_ == ArrivalKind::kConstant) return 1.0 / rate_;
  return rng_.Exponential(rate_);
}

}  // namespace pkv::serve_bench
