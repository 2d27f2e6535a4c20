// A DeviceCommunicator group whose ranks all live on ONE GPU, each with its own stream: tensor
// parallelism with TP = 2 or 4 on a single GPU, so the sharded CUDA forward pass (and its
// collective placement) is tested where only one GPU is available. NCCL cannot do this (it
// refuses two ranks on one device).
//
// A collective on rank r (its thread, its stream S_r) is two phases:
//   1. record ready_r on S_r, publish the buffer pointer, host barrier; S_r waits for every
//      ready_q: all ranks' inputs are complete before anything reads them;
//   2. the data movement on S_r (all-reduce: rank r sums elements [r*C, (r+1)*C) of every rank's
//      buffer, C = ceil(count / N), in rank order ((d_0 + d_1) + d_2) + ... in float32, rounds
//      once, and writes the sum into every rank's buffer; all-gather: rank r copies every rank's
//      send buffer into its own recv); record done_r, host barrier; S_r waits for every done_q,
//      so no rank reads its buffer before every slice was written, or overwrites a buffer another
//      rank still reads.
// Results are the same bits on every rank and run to run. An event is re-recorded only after the
// barrier that follows every other rank's wait on it, so each wait sees this collective's record.
// The host barriers make it uncapturable (capturable() == false): CUDA graphs stay off for its
// ranks. It exists for testing and single-GPU experiments, not speed (two host barriers and
// 2 (N - 1) event waits per collective).
//
// Abort(reason) wakes every rank waiting in a barrier; they and later collectives return
// ABORTED. Thread-safety: rank(r) is used by rank r's thread only; Abort() from any thread.
// Ownership: the group owns its communicators and events; streams are the caller's and must
// outlive the group.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/parallel/device_communicator.h"
#include "worker/parallel/in_process_group.h"
#include "worker/parallel/slice_sum.h"

namespace pkv {

class SharedDeviceGroup {
 public:
  static constexpr int kMaxRanks = kMaxSliceSumRanks;

  // streams[r] is rank r's stream on `device`. INVALID_ARGUMENT for 0 or more than kMaxRanks
  // streams; INTERNAL when the events cannot be created.
  static absl::StatusOr<std::unique_ptr<SharedDeviceGroup>> Create(
      int device, const std::vector<cudaStream_t>& streams);
  ~SharedDeviceGroup();
  SharedDeviceGroup(const SharedDeviceGroup&) = delete;
  SharedDeviceGroup& operator=(const SharedDeviceGroup&) = delete;

  int world_size() const { return static_cast<int>(streams_.size()); }
  // REQUIRES: 0 <= r < world_size(). Owned by the group.
  DeviceCommunicator* rank(int r) const;
  void Abort(const std::string& reason);

 private:
  class Rank;
  friend class Rank;
  SharedDeviceGroup(int device, std::vector<cudaStream_t> streams,
                    std::unique_ptr<InProcessGroup> host);

  // Phase 1 of a collective: publish `ptr`/`count`, wait (host, then stream) for every rank.
  absl::Status Enter(int r, void* ptr, int64_t count);
  // Phase 2's end: record done, wait (host, then stream) for every rank's data movement.
  absl::Status Leave(int r);
  absl::Status AllReduceSum(int r, void* data, int64_t count, CollectiveDType type);
  absl::Status AllGather(int r, const float* send, int64_t count, float* recv);

  const int device_;
  const std::vector<cudaStream_t> streams_;  // [N], not owned
  std::unique_ptr<InProcessGroup> host_;     // the host barriers (and Abort)
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<cudaEvent_t> ready_, done_;  // [N] each
  // Slot r written by rank r before a barrier, read by the others after it (the barrier's mutex
  // orders the accesses).
  std::vector<void*> ptrs_;      // [N]
  std::vector<int64_t> counts_;  // [N] must agree
};

}  // namespace pkv
