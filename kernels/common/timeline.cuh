// Device side of the step timeline (timeline.h): included by pdl.cuh in PKV_TIMELINE builds only.
#pragma once

#include <cstdint>

#include "kernels/common/timeline.h"

namespace pkv::gpu {
namespace {

// This translation unit's buffer pointer: constant memory, so reading it costs no global round
// trip before the wait it measures.
__constant__ TimelineRecord* g_timeline;

cudaError_t SetTimeline(TimelineRecord* records) {
  return cudaMemcpyToSymbol(g_timeline, &records, sizeof records);
}
[[maybe_unused]] const bool kTimelineRegistered = RegisterTimelineModule(&SetTimeline);

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t GridId() {
  uint64_t g;
  asm("mov.u64 %0, %%gridid;" : "=l"(g));
  return g;
}

// Thread 0's record of this CTA, or nullptr (not armed, another thread, a CTA past the table).
__device__ __forceinline__ TimelineRecord* TimelineSlot() {
  if (g_timeline == nullptr || threadIdx.x + threadIdx.y + threadIdx.z != 0 ||
      blockIdx.y + blockIdx.z != 0 || blockIdx.x >= kTimelineCtas) {
    return nullptr;
  }
  return g_timeline + (GridId() % kTimelineLaunches) * kTimelineCtas + blockIdx.x;
}

__device__ __forceinline__ void TimelineWaited(uint64_t t_wait) {
  const uint64_t t_go = GlobalTimerNs();
  if (TimelineRecord* r = TimelineSlot()) {
    uint32_t sm;
    asm("mov.u32 %0, %%smid;" : "=r"(sm));
    r->grid_id = GridId();
    r->t_wait = t_wait;
    r->t_go = t_go;
    r->cta = blockIdx.x;
    r->grid = gridDim.x;
    r->threads = blockDim.x;
    r->sm = sm;
  }
}

__device__ __forceinline__ void TimelineExit() {
  if (TimelineRecord* r = TimelineSlot()) r->t_exit = GlobalTimerNs();
}

}  // namespace
}  // namespace pkv::gpu
