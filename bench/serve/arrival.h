// Open-loop arrival processes: when each request is sent, independent of when earlier ones end.
//   poisson   exponential gaps with mean 1 / rate (a Poisson process of that rate)
//   constant  every 1 / rate seconds
// Closed loop (--concurrency) is the driver's, not an arrival process. Deterministic from the
// seed. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/serve/rng.h"

namespace pkv::serve_bench {

enum class ArrivalKind { kPoisson, kConstant };

absl::StatusOr<ArrivalKind> ParseArrivalKind(const std::string& name);
const char* ArrivalKindName(ArrivalKind kind);

class ArrivalProcess {
 public:
  // REQUIRES: rate > 0 (requests per second).
  ArrivalProcess(ArrivalKind kind, double rate, uint64_t seed);
  // Seconds from the previous arrival (the run's start for the first) to the next one.
  double NextGapSeconds();

 private:
  ArrivalKind kind_;
  double rate_;
  Rng rng_;
};

}  // namespace pkv::serve_bench
