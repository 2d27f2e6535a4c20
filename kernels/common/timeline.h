// Per-CTA timeline of a step, for PKV_TIMELINE measurement builds only (CMake -DPKV_TIMELINE=ON):
// every kernel that calls PdlWait (pdl.cuh) records, for each of its first kTimelineCtas CTAs,
// when the CTA reached the wait, when the wait returned and (kernels that mark it) when the CTA
// left, by the GPU's global nanosecond timer. `pkv-bench e2e --timeline_dir` captures one decode
// step this way, so the time between kernels (a PDL boundary's release, a grid's tail, a CTA's
// first bytes) can be read per boundary instead of inferred from step totals (bench/NOTES.md).
//
// Records sit at slot (grid id mod kTimelineLaunches) x kTimelineCtas + CTA: no atomics on the
// measured path; the grid id in a record says which launch wrote it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace pkv::gpu {

struct TimelineRecord {
  uint64_t grid_id = 0;  // %gridid of the launch; 0: no CTA wrote this slot
  uint64_t t_wait = 0;   // %globaltimer (ns) when the CTA reached PdlWait
  uint64_t t_go = 0;     // ... when the wait returned
  uint64_t t_exit = 0;   // ... when thread 0 left the kernel (0 where the kernel does not mark it)
  uint32_t cta = 0, grid = 0, threads = 0, sm = 0;
};

inline constexpr int64_t kTimelineLaunches = 4096;
inline constexpr int64_t kTimelineCtas = 512;
inline constexpr int64_t kTimelineRecords = kTimelineLaunches * kTimelineCtas;

// Each CUDA translation unit that includes pdl.cuh in a timeline build registers the setter of
// its own copy of the buffer pointer (without relocatable device code each has one).
using TimelineSetter = cudaError_t (*)(TimelineRecord*);
inline std::vector<TimelineSetter>& TimelineModules() {
  static std::vector<TimelineSetter> modules;
  return modules;
}
inline bool RegisterTimelineModule(TimelineSetter set) {
  TimelineModules().push_back(set);
  return true;
}

// Points every registered module's kernels at `records` (kTimelineRecords of them; nullptr stops
// recording). *built: whether this build records a timeline at all (a module registered).
inline cudaError_t ArmTimeline(TimelineRecord* records, bool* built) {
  *built = !TimelineModules().empty();
  for (TimelineSetter set : TimelineModules()) {
    if (const cudaError_t e = set(records); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace pkv::gpu
