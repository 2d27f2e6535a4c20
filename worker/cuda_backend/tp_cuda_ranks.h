// TpCudaBackend's per-rank state (internal to worker/cuda_backend): the ranks' one-GPU backends,
// their communicators and hooks, the rank threads, and the one full-vocabulary step builder.
// tp_cuda_load.cc builds it; tp_cuda_backend.cc runs steps on it.
// Thread-safety: during a step, rank r's thread touches only index r of the per-rank vectors;
// `host` is written before the fan-out and only read during it; Abort() from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/cuda_backend/backend_impl.h"
#include "worker/cuda_backend/step_builder.h"
#include "worker/cuda_backend/tp_cuda_backend.h"
#include "worker/cuda_backend/tp_rank_hooks.h"
#include "worker/parallel/device_communicator.h"
#include "worker/parallel/rank_threads.h"
#include "worker/parallel/shared_device_group.h"
#if PKV_HAVE_NCCL
#include "worker/parallel/nccl_communicator.h"
#endif

namespace pkv {

class TpCudaBackend::Ranks {
 public:
  explicit Ranks(std::vector<int> devices_in);
  // Tears down in dependency order: threads, each rank's hooks and backend (its CUDA graphs) with
  // its device current, then the communicators.
  ~Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int tp() const { return static_cast<int>(devices.size()); }
  // Aborts every communicator (ranks blocked in a collective return) and marks the group dead.
  void Abort(const std::string& reason);
  // OK, or FAILED_PRECONDITION with the reason of the abort that killed the group.
  absl::Status CheckAlive();

  const std::vector<int> devices;                              // [tp] CUDA device of each rank
  std::unique_ptr<RankThreads> threads;                        // tp - 1 helper threads
  std::vector<std::unique_ptr<CudaModelBackend::Impl>> impls;  // [tp]
#if PKV_HAVE_NCCL
  std::vector<std::unique_ptr<NcclCommunicator>> nccl;  // [tp] when NCCL joins the ranks
#endif
  std::unique_ptr<SharedDeviceGroup> shared;  // when every rank shares one device
  std::vector<DeviceCommunicator*> comms;     // [tp] rank r's communicator (owned above)
  std::vector<std::unique_ptr<cuda_backend::TpRankHooks>> hooks;  // [tp]
  std::unique_ptr<cuda_backend::StepBuilder> builder;  // validates against the full vocabulary
  cuda_backend::StepHost host;                         // this step, built once, staged by each rank
  bool graphs = true;   // CUDA graphs asked for (and possible with this communicator)
  bool timing = false;  // collectives timed (eager steps)

 private:
  std::atomic<bool> aborted_{false};
  absl::Mutex mu_;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pkv
