#include "worker/cuda_backend/graph_cache.h"

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace pkv::cuda_backend {

GraphCache::~GraphCache() {
  for (auto& [key, exec] : execs_) cudaGraphExecDestroy(exec);
}

cudaGraphExec_t GraphCache::Find(uint64_t key) const {
  auto it = execs_.find(key);
  return it == execs_.end() ? nullptr : it->second;
}

absl::StatusOr<bool> GraphCache::Run(int32_t bucket, uint64_t signature, cudaStream_t stream,
                                     absl::FunctionRef<absl::Status()> enqueue) {
  const uint64_t key = Key(bucket, signature);
  cudaGraphExec_t exec = Find(key);
  if (exec == nullptr && warm_.contains(key) && !uncapturable_.contains(key)) {
    absl::StatusOr<cudaGraphExec_t> captured = Capture(key, stream, enqueue);
    if (captured.ok()) {
      exec = *captured;
    } else {
      PKV_LOG(WARNING) << "CUDA graph capture failed for bucket " << bucket
                       << ", running it eagerly: " << captured.status().message();
      uncapturable_.insert(key);
    }
  }
  if (exec != nullptr) {
    PKV_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream));
    return true;
  }
  PKV_RETURN_IF_ERROR(enqueue());
  warm_.insert(key);
  return false;
}

absl::StatusOr<cudaGraphExec_t> GraphCache::Capture(uint64_t key, cudaStream_t stream,
                                                    absl::FunctionRef<absl::Status()> enqueue) {
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status st = enqueue();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!st.ok() || end != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves a non-sticky error behind
    if (!st.ok()) return st;
    return CudaStatus(end, "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) return CudaStatus(inst, "cudaGraphInstantiate");
  execs_[key] = exec;
  return exec;
}

}  // namespace pkv::cuda_backend
