// Retry backoff before re-placing a request (gRPC connection-backoff style): attempt n waits
// base * 2^(n-1), capped at max, times a jitter factor uniform in [0.5, 1.5) so retries of many
// streams after one worker dies do not arrive in lockstep. Example: base 50 ms, attempt 3 ->
// 200 ms * [0.5, 1.5) = 100..300 ms. Pure; `random` is any uniformly distributed 64-bit value.
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"

namespace pkv::router {

inline absl::Duration RetryBackoff(int attempt, absl::Duration base, absl::Duration max,
                                   uint64_t random) {
  absl::Duration d = base;
  for (int i = 1; i < attempt && d < max; ++i) d *= 2;
  d = std::min(d, max);
  const double jitter = 0.5 + static_cast<double>(random >> 11) * 0x1.0p-53;  // [0.5, 1.5)
  return d * jitter;
}

}  // namespace pkv::router
