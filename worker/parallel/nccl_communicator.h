// Communicator over NCCL: the ranks of one worker are GPUs of one host, one rank per GPU, joined
// with a unique id created once in the process (NewNcclUniqueId) and handed to every rank's
// thread. Built only when CUDA and NCCL are found (PKV_HAVE_NCCL).
//
// Collectives are enqueued on the communicator's stream (the rank's compute stream, so an
// all-reduce is ordered after the GEMM that produced its input and before the residual add that
// reads it) and return once enqueued; Barrier() is the exception and waits on the host. They can
// be captured into a CUDA graph with the rest of a decode step. Buffers are device memory of the
// rank's GPU.
//
// NCCL_NVLS_ENABLE=0 is forced before NCCL starts (transport.h says why); the group's expected
// transport (P2P/NVLink, P2P/PCIe, SHM/PCIe) is logged at creation (p2p_probe.h).
// Errors: INTERNAL with NCCL's message (ncclGetLastError). After an error, Abort() the
// communicators of the group and rebuild it; a worker treats it as a fatal backend error.
// Thread-safety: one thread per communicator; Abort() from any thread.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/parallel/device_communicator.h"

namespace pkv {

// A fresh group id (forces NCCL_NVLS_ENABLE=0 first). Call once per group, before starting the
// rank threads.
absl::StatusOr<ncclUniqueId> NewNcclUniqueId();

class NcclCommunicator : public DeviceCommunicator {
 public:
  // Joins group `id` as `rank` of `world_size` on CUDA device `device` (made current on the
  // calling thread), enqueuing collectives on `stream` (not owned; nullptr = the legacy default
  // stream). Blocks until every rank has joined: call it from one thread per rank at once.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Init(const ncclUniqueId& id, int rank,
                                                                int world_size, int device,
                                                                cudaStream_t stream);

  // Every rank of a new group from one thread (ncclCommInitRank per device inside one
  // ncclGroupStart/End), after logging the expected transport. streams[i] is rank i's stream.
  // INVALID_ARGUMENT for an empty or duplicate device list or mismatched sizes.
  static absl::StatusOr<std::vector<std::unique_ptr<NcclCommunicator>>> CreateGroup(
      const std::vector<int>& devices, const std::vector<cudaStream_t>& streams);

  ~NcclCommunicator() override;  // ncclCommDestroy (after Abort: nothing)

  // Finalizes every communicator of a group from one thread (ncclCommFinalize of each inside one
  // ncclGroupStart/End, as NCCL requires when one thread holds several ranks: a lone finalize
  // would wait for the ranks not yet finalized), so destroying them afterwards cannot block.
  // Aborted communicators are skipped. Best effort: errors are logged.
  static void FinalizeGroup(const std::vector<std::unique_ptr<NcclCommunicator>>& comms);
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string transport() const override { return transport_; }
  int device() const override { return device_; }
  cudaStream_t stream() const override { return stream_; }
  void set_stream(cudaStream_t stream) { stream_ = stream; }
  void set_transport(std::string transport) { transport_ = std::move(transport); }
  ncclComm_t comm() const { return comm_; }

  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status AllGather(const float* send, int64_t count, float* recv) override;
  absl::Status Barrier() override;

  // In-place sum of `count` elements of `type` (ncclFloat16 / ncclBfloat16: a CUDA backend's
  // activations). data: device [count].
  absl::Status AllReduceSum(void* data, int64_t count, ncclDataType_t type);
  // DeviceCommunicator: the same, for the backend's element types. Capturable into CUDA graphs.
  absl::Status AllReduceSum(void* data, int64_t count, CollectiveDType type) override;
  bool capturable() const override { return true; }
  // An error a collective hit after it was enqueued (ncclCommGetAsyncError).
  absl::Status CheckAsyncError();
  // ncclCommAbort: collectives of this rank blocked on the host return, later ones are ABORTED.
  // May run on another thread than the rank's (to unblock it).
  void Abort() override;

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int world_size, int device, cudaStream_t stream);
  absl::Status Check(ncclResult_t result, const char* what) const;

  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};  // Abort() may run on another thread
  int rank_ = 0;
  int world_size_ = 1;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  float* barrier_word_ = nullptr;  // device [1], the payload of Barrier()'s all-reduce
  std::string transport_ = "nccl";
};

}  // namespace pkv
