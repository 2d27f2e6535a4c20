// Call deadlines that the clock can hold. A gRPC deadline can lie far beyond what
// std::chrono::system_clock (int64 nanoseconds, up to the year 2262) represents: grpc-go sends
// `grpc-timeout: 2562047H` for its maximal duration and the spec allows up to 99999999H (11 400
// years). grpc::ServerContext::deadline() converts such a deadline with an overflow, so it reads
// as long expired. These helpers read the raw deadline and clamp: anything past kFarFuture counts
// as no deadline at all.
#pragma once

#include <chrono>

#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace pkv {

// Deadlines later than this (about 100 years from any plausible now) are treated as infinite.
inline constexpr int64_t kFarFutureUnixSeconds = int64_t{4102444800};  // 2100-01-01

// The call's deadline as absl::Time; absl::InfiniteFuture() when it has none or one past
// kFarFutureUnixSeconds.
absl::Time ServerCallDeadline(const grpc::ServerContextBase& ctx);

// For a client call's set_deadline: time_point::max() (no deadline) for an infinite or far-future
// time, else the same instant.
std::chrono::system_clock::time_point ToClientDeadline(absl::Time deadline);

// True when `deadline` is finite and not after `now`.
inline bool DeadlinePassed(absl::Time deadline, absl::Time now = absl::Now()) {
  return deadline != absl::InfiniteFuture() && now >= deadline;
}

}  // namespace pkv
