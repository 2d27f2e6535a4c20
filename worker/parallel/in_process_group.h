// Collectives between ranks that are threads of one process: the CPU implementation of
// Communicator, which lets CI run the tensor-parallel forward pass (and its all-reduce placement)
// without GPUs or NCCL.
//
// Exactness: AllReduceSum adds the ranks' values in rank order, ((d_0 + d_1) + d_2) + ..., for
// every element, whatever order the threads arrive in; every rank receives the same bits, and a
// run is bit-for-bit reproducible. Each collective is two group barriers (publish the buffers;
// everyone done) with the data movement between them split across the ranks: rank r reduces or
// copies its 1/world_size slice of the elements, so no element is touched by two threads at once
// and no scratch buffer is needed.
//
// Abort(reason) wakes every rank waiting in a collective and makes it, and every later
// collective, return ABORTED with the reason; a rank that hits an error mid-step calls it so the
// others do not wait forever.
// Thread-safety: rank(r) is used by one thread (rank r's) at a time; Abort() from any thread.
// Ownership: the group owns its Communicators; it must outlive their use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/parallel/communicator.h"

namespace pkv {

class InProcessGroup {
 public:
  // INVALID_ARGUMENT unless 1 <= world_size <= kMaxWorldSize.
  static absl::StatusOr<std::unique_ptr<InProcessGroup>> Create(int world_size);
  static constexpr int kMaxWorldSize = 64;

  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;
  ~InProcessGroup();

  int world_size() const { return world_size_; }
  // REQUIRES: 0 <= r < world_size(). Owned by the group.
  Communicator* rank(int r) const;

  void Abort(const std::string& reason);

 private:
  class Rank;
  explicit InProcessGroup(int world_size);

  // Blocks until all world_size ranks have arrived at this barrier; ABORTED after Abort().
  absl::Status Arrive();
  // The half-open element range [begin, end) of `count` that rank r moves in a collective.
  static void SliceOf(int64_t count, int world_size, int r, int64_t* begin, int64_t* end);

  absl::Status AllReduceSum(int r, float* data, int64_t count);
  absl::Status AllGather(int r, const float* send, int64_t count, float* recv);

  const int world_size_;
  std::vector<std::unique_ptr<Rank>> ranks_;

  // Published by rank r before the first barrier of a collective and read by the others between
  // the two barriers (the barrier's mutex orders the accesses).
  std::vector<float*> data_;        // [world_size] AllReduceSum buffers / AllGather recv buffers
  std::vector<const float*> send_;  // [world_size] AllGather send buffers
  std::vector<int64_t> count_;      // [world_size] element counts (must agree)

  absl::Mutex mu_;
  absl::CondVar cv_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pkv
