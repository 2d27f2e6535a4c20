// Per-worker circuit breaker: ejection with exponential backoff and jitter, and a half-open probe
// (RELIABILITY.md F7; Envoy outlier detection and SGLang's breaker are the models).
//
//   kClosed ──Trip()──▶ kOpen (until reopen_at) ──AllowProbe() at/after reopen_at──▶ kHalfOpen
//   kHalfOpen ──OnProbeSuccess()──▶ kClosed        kHalfOpen ──Trip()──▶ kOpen (longer)
//
// A trip comes from a lost stream, a refused connection or `unhealthy_threshold` failed health
// checks. While open the router sends the worker nothing at all (no placements, no health checks);
// at reopen_at exactly one probe (a health Check, then GetModelInfo on success) may go out, so a
// down worker sees at most one probe burst per ejection period, never a herd of client requests.
// Ejection k of a streak lasts min(max, base * 2^(k-1)) scaled by a jitter factor uniform in
// [0.5, 1.0), so it never exceeds `max` and breakers of workers that failed together do not probe
// in lockstep. A worker that stays closed for `reset_after` starts its next streak from 1.
// Worked example (base 500 ms, max 3 s): a flapping worker is ejected for 0.25-0.5 s, then
// 0.5-1 s, 1-2 s, 1.5-3 s, 1.5-3 s, ...; a restarted worker is re-admitted at most `max` (plus
// one health check) after it came back.
//
// Pure state machine with time and randomness passed in; not thread-safe (WorkerRegistry guards
// each breaker with its mutex).
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace pkv::router {

struct CircuitBreakerOptions {
  absl::Duration base_ejection = absl::Milliseconds(500);
  absl::Duration max_ejection = absl::Seconds(3);
  absl::Duration reset_after = absl::Seconds(30);
};

class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };

  explicit CircuitBreaker(CircuitBreakerOptions options = {}) : options_(options) {}

  // A failure seen now. Opens the breaker (again, when open or half-open) with the next backoff
  // of the streak; `random` is any uniformly distributed 64-bit value. Returns true when this
  // trip ejected a closed worker (what pkv_router_worker_ejections_total counts).
  bool Trip(absl::Time now, uint64_t random);
  // Whether a health probe may be sent now. Closed: always (regular checks). Open: false until
  // reopen_at; the first call at or after it moves to kHalfOpen and returns true. Half-open:
  // false (the one probe is outstanding).
  bool AllowProbe(absl::Time now);
  // The worker answered a probe (any health status: it is reachable). Half-open -> closed.
  void OnProbeSuccess(absl::Time now);

  State state() const { return state_; }
  bool closed() const { return state_ == State::kClosed; }
  int streak() const { return streak_; }
  absl::Time reopen_at() const { return reopen_at_; }
  // The ejection length before jitter for the k-th trip of a streak (k >= 1).
  absl::Duration EjectionBeforeJitter(int k) const;

 private:
  CircuitBreakerOptions options_;
  State state_ = State::kClosed;
  int streak_ = 0;                                  // trips since the last reset
  absl::Time reopen_at_ = absl::InfinitePast();     // when an open breaker may probe
  absl::Time closed_since_ = absl::InfinitePast();  // start of the current closed period
};

}  // namespace pkv::router
