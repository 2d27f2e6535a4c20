#include <algorithm>

#include "bench/kernels/gpu_util.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pkv::bench {

using policy::LaunchStreamRead;

namespace {

__global__ void EmptyKernel() {}

}  // namespace

absl::StatusOr<double> MeasureStreamReadGBps(int64_t bytes, int reps, cudaStream_t stream) {
  void* buf = nullptr;
  uint32_t* sink = nullptr;
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&buf, bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&sink, 4));
  PKV_RETURN_IF_ERROR(FillRandom16(buf, bytes / 2, 1, false, stream));
  int sms = 0;
  PKV_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1;
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int r = 0; r < reps + 2; ++r) {
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0, stream));
    PKV_RETURN_IF_ERROR(LaunchStreamRead(buf, bytes, sink, sms * 8, 512, stream));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1, stream));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1));
    float ms = 0;
    PKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 2) us.push_back(ms * 1e3);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(buf);
  cudaFree(sink);
  return bytes / (Percentile(us, 0.5) * 1e-6) / 1e9;
}

absl::StatusOr<LaunchFloor> MeasureLaunchFloor(int reps, cudaStream_t stream) {
  cudaEvent_t e0, e1;
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  cudaGraphExec_t exec[2] = {nullptr, nullptr};
  for (int k = 0; k < 2; ++k) {
    cudaGraph_t g;
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i <= k; ++i) EmptyKernel<<<1, 32, 0, stream>>>();
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream, &g));
    PKV_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec[k], g, 0));
    cudaGraphDestroy(g);
  }
  std::vector<double> t[4];
  for (int r = 0; r < reps + 5; ++r) {
    for (int mode = 0; mode < 4; ++mode) {
      PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0, stream));
      if (mode < 2) {
        for (int i = 0; i <= mode; ++i) EmptyKernel<<<1, 32, 0, stream>>>();
      } else {
        PKV_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec[mode - 2], stream));
      }
      PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1, stream));
      PKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1));
      float ms = 0;
      PKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 5) t[mode].push_back(ms * 1e3);
    }
  }
  for (auto* x : exec) cudaGraphExecDestroy(x);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return LaunchFloor{Percentile(t[0], 0.5), Percentile(t[1], 0.5), Percentile(t[2], 0.5),
                     Percentile(t[3], 0.5)};
}

}  // namespace pkv::bench
