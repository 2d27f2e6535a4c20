// The collective operations tensor parallelism needs, behind one interface so the same sharded
// forward pass runs over threads of one process (InProcessGroup, CPU; tests and CI) or over GPUs
// (NcclCommunicator).
//
// A group has world_size() ranks numbered 0..world_size()-1; each rank holds its own
// Communicator. A collective is entered by every rank of the group, in the same order, with the
// same `count` (SPMD lockstep); a rank that skips one or passes a different count is a bug in the
// caller, not input to validate.
//
// Buffers live where the rank computes: host memory for InProcessGroup, device memory of the
// rank's GPU for NcclCommunicator. In-process collectives are complete when the call returns; NCCL
// collectives are enqueued on the communicator's stream and complete in stream order (the call
// returns once they are enqueued), so a CUDA backend enqueues them between its GEMMs without a
// host synchronisation.
//
// Errors: a failed collective returns INTERNAL (NCCL) or ABORTED (the group was aborted). After
// an error the group is unusable: the owner aborts it so ranks blocked in a collective return
// instead of waiting forever, and rebuilds it (a worker treats it as a fatal backend error).
// Thread-safety: one Communicator is used by one thread (its rank's) at a time.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pkv {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // How the ranks exchange data, for logs: "in-process", "nccl (P2P/NVLink)", ...
  virtual std::string transport() const = 0;

  // data[i] = sum over ranks r of data_r[i], for i < count, on every rank. The result is the same
  // bits on every rank. InProcessGroup adds in rank order ((d_0 + d_1) + d_2) + ..., so it is also
  // the same bits run to run.
  //   data [count]
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;

  // recv[r * count + i] = send_r[i] for every rank r, on every rank (rank-major concatenation).
  //   send [count], recv [world_size * count]; REQUIRES: recv does not overlap send.
  virtual absl::Status AllGather(const float* send, int64_t count, float* recv) = 0;

  // Returns once every rank has entered it.
  virtual absl::Status Barrier() = 0;
};

}  // namespace pkv
