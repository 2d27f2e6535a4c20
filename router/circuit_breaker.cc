#include "router/circuit_breaker.h"

#include <algorithm>

namespace pkv::router {

absl::Duration CircuitBreaker::EjectionBeforeJitter(int k) const {
  absl::Duration d = options_.base_ejection;
  for (int i = 1; i < k && d < options_.max_ejection; ++i) d *= 2;
  return std::min(d, options_.max_ejection);
}

bool CircuitBreaker::Trip(absl::Time now, uint64_t random) {
  const bool ejected = state_ == State::kClosed;
  // A worker that stayed closed long enough has recovered: its next failure starts a new streak.
  if (ejected && closed_since_ != absl::InfinitePast() &&
      now - closed_since_ >= options_.reset_after) {
    streak_ = 0;
  }
  ++streak_;
  const double jitter = 0.5 + 0.5 * (static_cast<double>(random >> 11) * 0x1.0p-53);  // [0.5, 1)
  reopen_at_ = now + EjectionBeforeJitter(streak_) * jitter;
  state_ = State::kOpen;
  return ejected;
}

bool CircuitBreaker::AllowProbe(absl::Time now) {
  switch (state_) {
    case State::kClosed:
      return true;
    case State::kHalfOpen:
      return false;
    case State::kOpen:
      if (now < reopen_at_) return false;
      state_ = State::kHalfOpen;
      return true;
  }
  return false;
}

void CircuitBreaker::OnProbeSuccess(absl::Time now) {
  if (state_ == State::kClosed) return;
  // A late answer to a probe sent before the breaker opened does not close it early.
  if (state_ == State::kOpen) return;
  state_ = State::kClosed;
  closed_since_ = now;
}

}  // namespace pkv::router
