#include "worker/engine/test_faults.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pkv {

absl::StatusOr<TestFaults> ParseTestFaults(const std::string& spec) {
  TestFaults faults;
  if (spec.empty()) return faults;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(item, ':');
    int64_t value = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--test_fault: expected name:N with N >= 0, got '", item, "'"));
    }
    if (kv[0] == "fail_forward_after")
      faults.fail_forward_after = value;
    else if (kv[0] == "hang_step_after")
      faults.hang_step_after = value;
    else if (kv[0] == "slow_step_ms")
      faults.slow_step_ms = value;
    else if (kv[0] == "fail_kv_alloc_after")
      faults.fail_kv_alloc_after = value;
    else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--test_fault: unknown fault '", kv[0],
          "' (known: fail_forward_after, hang_step_after, slow_step_ms, fail_kv_alloc_after)"));
    }
  }
  return faults;
}

}  // namespace pkv
