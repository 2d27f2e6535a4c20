// Fault hooks for reliability tests (RELIABILITY.md 3.0), as parsed from --test_fault. Refused
// unless the worker runs with --enable_test_faults, so a production worker can never be told to
// fail. They act through FaultInjectingBackend (fault_injecting_backend.h), a wrapper the worker
// puts around its model backend only when a fault is set: the engine itself checks none of them.
//   fail_forward_after:N   the backend step after N successful steps fails (INTERNAL)
//   hang_step_after:N      step N+1 blocks forever (a wedged GPU)
//   slow_step_ms:X         every step sleeps X ms first
//   fail_kv_alloc_after:N  the first step that feeds the (N+1)-th distinct sequence fails like a
//                          KV allocator error (RESOURCE_EXHAUSTED) before it runs
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pkv {

struct TestFaults {
  int64_t fail_forward_after = -1;
  int64_t hang_step_after = -1;
  int64_t slow_step_ms = 0;
  int64_t fail_kv_alloc_after = -1;

  bool any() const {
    return fail_forward_after >= 0 || hang_step_after >= 0 || slow_step_ms > 0 ||
           fail_kv_alloc_after >= 0;
  }
};

// Parses a comma-separated list such as "slow_step_ms:20,fail_forward_after:10".
absl::StatusOr<TestFaults> ParseTestFaults(const std::string& spec);

}  // namespace pkv
