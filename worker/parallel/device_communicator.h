// The collectives a tensor-parallel CUDA backend enqueues between its kernels: a Communicator whose
// buffers are device memory of the rank's GPU and whose operations are ordered on the rank's
// stream. Two implementations:
//   - NcclCommunicator (nccl_communicator.h): one rank per GPU, NCCL; collectives can be captured
//     into a CUDA graph with the rest of a step (capturable() == true);
//   - SharedDeviceGroup (shared_device_group.h): every rank on the same GPU, so TP=2/4 runs and is
//     tested on a single GPU; host barriers order the ranks' streams, so it cannot be captured
//     (capturable() == false: the backend runs those steps eagerly).
//
// Contract (on top of communicator.h's SPMD lockstep): a collective is ordered after everything
// the rank enqueued on stream() before it and before everything enqueued after it; the call may
// return before the data moved. Every rank receives the same bits.
// Thread-safety: one thread per rank (its own); Abort() from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "worker/parallel/communicator.h"

namespace pkv {

// Element types of device all-reduces: the float32 residual stream and the 16-bit activations.
enum class CollectiveDType { kFloat32, kFloat16, kBFloat16 };

class DeviceCommunicator : public Communicator {
 public:
  using Communicator::AllReduceSum;

  virtual int device() const = 0;           // CUDA ordinal of the rank's GPU
  virtual cudaStream_t stream() const = 0;  // where the rank's collectives are enqueued

  // In-place sum over the ranks of `count` elements of `type`. data: device [count].
  // 16-bit sums: the partial values are added in float32 and rounded to the type at the end
  // (SharedDeviceGroup: once, in rank order; NCCL: its own reduction order).
  virtual absl::Status AllReduceSum(void* data, int64_t count, CollectiveDType type) = 0;

  // Whether the collectives may be enqueued while the stream is being captured into a CUDA graph.
  virtual bool capturable() const = 0;

  // Makes ranks blocked in (or entering) a collective return; the group is unusable afterwards.
  virtual void Abort() = 0;
};

}  // namespace pkv
