// `pkv-bench e2e --timeline_dir`: one decode step's per-CTA timeline (kernels/common/timeline.h)
// written as a TSV, for PKV_TIMELINE builds. RunDecode arms it for the whole run (every kernel
// then records; plain stores, no atomics) and clears it just before the last step, so the file
// holds that step alone: one row per CTA (< kTimelineCtas) of every kernel that calls PdlWait,
// ordered by when its wait returned. bench/e2e/timeline_report.py reads it per kernel boundary.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/timeline.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv::bench {

class StepTimeline {
 public:
  // FAILED_PRECONDITION when this build records no timeline (configure with -DPKV_TIMELINE=ON).
  static absl::StatusOr<StepTimeline> Start();
  // Waits for the GPU and clears the records: what the next launches write is one step's.
  absl::Status Clear();
  // Waits for the GPU, stops recording and writes the records (times relative to the earliest
  // wait) to `path`.
  absl::Status Write(const std::string& path);

 private:
  explicit StepTimeline(cuda_backend::DeviceBuffer records) : records_(std::move(records)) {}
  cuda_backend::DeviceBuffer records_;
};

}  // namespace pkv::bench
