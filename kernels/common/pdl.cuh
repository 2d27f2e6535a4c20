// Programmatic dependent launch (PDL, sm_90+) for the model kernels and decode attention.
//
// A kernel launched with LaunchMaybePdl(pdl = true) may start while the previous kernel on the
// stream is still running (once all of that kernel's CTAs have called PdlTrigger or exited).
// Contract for every kernel launched this way:
//   - before PdlWait, touch only memory no earlier kernel of the step writes (weights, norm
//     weights, RoPE frequencies);
//   - every CTA calls PdlWait before any other read or any write, so a kernel completes only
//     after its predecessor did, and "complete" stays transitive along the chain;
//   - PdlTrigger after PdlWait lets the next kernel launch early; it never affects correctness
//     (the next kernel's PdlWait waits for this grid's completion and memory flush).
// Without the launch attribute both calls return at once, and on code compiled below sm_90 they
// are empty, so the same kernels serve every target; PdlUsable (gemv.h) keeps the attribute off
// where the wait would be missing.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#ifdef PKV_TIMELINE
#include "kernels/common/timeline.cuh"
#endif

namespace pkv::gpu {

// `timeline`: whether a PKV_TIMELINE build records this wait as the CTA's (false for a second
// wait of a CTA that already waited, which would overwrite the first).
__device__ __forceinline__ void PdlWait(bool timeline = true) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#ifdef PKV_TIMELINE
  const uint64_t t_wait = GlobalTimerNs();
#endif
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#ifdef PKV_TIMELINE
  if (timeline) TimelineWaited(t_wait);
#endif
#endif
}

// Marks the CTA's exit in the step timeline (timeline.h); empty outside PKV_TIMELINE builds.
__device__ __forceinline__ void TimelineExitMark() {
#if defined(PKV_TIMELINE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  TimelineExit();
#endif
}

__device__ __forceinline__ void PdlTrigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The launch configuration of LaunchMaybePdl; `attr` must outlive the launch call.
inline cudaLaunchConfig_t PdlLaunchConfig(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                          bool pdl, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  return config;
}

// Launches `kernel` on `stream`, with programmatic stream serialization when `pdl`.
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchMaybePdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                           cudaStream_t stream, bool pdl, Args&&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = PdlLaunchConfig(grid, block, smem, stream, pdl, &attr);
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// The same for a kernel known only by its address (a run-time kernel table), with
// cudaLaunchKernel's argument array.
inline cudaError_t LaunchMaybePdl(const void* kernel, dim3 grid, dim3 block, size_t smem,
                                  cudaStream_t stream, bool pdl, void** args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t config = PdlLaunchConfig(grid, block, smem, stream, pdl, &attr);
  return cudaLaunchKernelExC(&config, kernel, args);
}

}  // namespace pkv::gpu
