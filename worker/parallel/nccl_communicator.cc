#include "worker/parallel/nccl_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/parallel/p2p_probe.h"
#include "worker/parallel/transport.h"

namespace pkv {
namespace {

absl::Status NcclError(ncclResult_t result, const char* what, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return absl::InternalError(
      absl::StrCat(what, ": ", ncclGetErrorString(result), (last != nullptr && *last) ? " (" : "",
                   last != nullptr ? last : "", (last != nullptr && *last) ? ")" : ""));
}

#define PKV_NCCL_RETURN_IF_ERROR(call, comm)                                        \
  do {                                                                              \
    ncclResult_t pkv_nccl_res_ = (call);                                            \
    if (pkv_nccl_res_ != ncclSuccess) return NcclError(pkv_nccl_res_, #call, comm); \
  } while (0)

}  // namespace

absl::StatusOr<ncclUniqueId> NewNcclUniqueId() {
  ForceNcclNvlsOff();
  ncclUniqueId id;
  PKV_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id), nullptr);
  return id;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int world_size, int device,
                                   cudaStream_t stream)
    : comm_(comm), rank_(rank), world_size_(world_size), device_(device), stream_(stream) {}

NcclCommunicator::~NcclCommunicator() {
  if (barrier_word_ != nullptr) {
    cudaSetDevice(device_);
    cudaFree(barrier_word_);
  }
  if (!aborted_.load()) ncclCommDestroy(comm_);
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Init(const ncclUniqueId& id,
                                                                         int rank, int world_size,
                                                                         int device,
                                                                         cudaStream_t stream) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL rank ", rank, " is not in a group of ", world_size));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  PKV_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm, world_size, id, rank), nullptr);
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(comm, rank, world_size, device, stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&c->barrier_word_, sizeof(float)));
  return c;
}

absl::StatusOr<std::vector<std::unique_ptr<NcclCommunicator>>> NcclCommunicator::CreateGroup(
    const std::vector<int>& devices, const std::vector<cudaStream_t>& streams) {
  if (devices.empty() || devices.size() != streams.size()) {
    return absl::InvalidArgumentError(absl::StrCat("an NCCL group needs one stream per GPU, got ",
                                                   devices.size(), " GPUs and ", streams.size(),
                                                   " streams"));
  }
  PKV_ASSIGN_OR_RETURN(TransportReport report, LogExpectedTransport(devices));
  PKV_ASSIGN_OR_RETURN(ncclUniqueId id, NewNcclUniqueId());
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(n, nullptr);
  PKV_NCCL_RETURN_IF_ERROR(ncclGroupStart(), nullptr);
  for (int r = 0; r < n; ++r) {
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(devices[r]));
    PKV_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comms[r], n, id, r), nullptr);
  }
  PKV_NCCL_RETURN_IF_ERROR(ncclGroupEnd(), nullptr);
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int r = 0; r < n; ++r) {
    out.emplace_back(new NcclCommunicator(comms[r], r, n, devices[r], streams[r]));
    out.back()->set_transport(absl::StrCat("nccl (", report.transport, ")"));
  }
  for (int r = 0; r < n; ++r) {
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(devices[r]));
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&out[r]->barrier_word_, sizeof(float)));
  }
  return out;
}

void NcclCommunicator::FinalizeGroup(const std::vector<std::unique_ptr<NcclCommunicator>>& comms) {
  ncclResult_t result = ncclGroupStart();
  for (const auto& c : comms) {
    if (result != ncclSuccess) break;
    if (c != nullptr && !c->aborted_.load()) result = ncclCommFinalize(c->comm_);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess || end != ncclSuccess) {
    PKV_LOG(WARNING) << "NCCL group finalize: "
                     << ncclGetErrorString(result != ncclSuccess ? result : end);
  }
}

absl::Status NcclCommunicator::Check(ncclResult_t result, const char* what) const {
  return result == ncclSuccess ? absl::OkStatus() : NcclError(result, what, comm_);
}

absl::Status NcclCommunicator::AllReduceSum(float* data, int64_t count) {
  return AllReduceSum(data, count, ncclFloat32);
}

absl::Status NcclCommunicator::AllReduceSum(void* data, int64_t count, ncclDataType_t type) {
  if (aborted_.load()) return absl::AbortedError("NCCL communicator was aborted");
  return Check(ncclAllReduce(data, data, static_cast<size_t>(count), type, ncclSum, comm_, stream_),
               "ncclAllReduce");
}

absl::Status NcclCommunicator::AllReduceSum(void* data, int64_t count, CollectiveDType type) {
  const ncclDataType_t nccl = type == CollectiveDType::kFloat32   ? ncclFloat32
                              : type == CollectiveDType::kFloat16 ? ncclFloat16
                                                                  : ncclBfloat16;
  return AllReduceSum(data, count, nccl);
}

absl::Status NcclCommunicator::AllGather(const float* send, int64_t count, float* recv) {
  if (aborted_.load()) return absl::AbortedError("NCCL communicator was aborted");
  return Check(ncclAllGather(send, recv, static_cast<size_t>(count), ncclFloat32, comm_, stream_),
               "ncclAllGather");
}

absl::Status NcclCommunicator::Barrier() {
  if (aborted_.load()) return absl::AbortedError("NCCL communicator was aborted");
  PKV_RETURN_IF_ERROR(
      Check(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_),
            "ncclAllReduce (barrier)"));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return CheckAsyncError();
}

absl::Status NcclCommunicator::CheckAsyncError() {
  if (aborted_.load()) return absl::AbortedError("NCCL communicator was aborted");
  ncclResult_t async = ncclSuccess;
  PKV_RETURN_IF_ERROR(Check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError"));
  return Check(async, "NCCL collective (asynchronous error)");
}

void NcclCommunicator::Abort() {
  if (aborted_.exchange(true)) return;
  ncclCommAbort(comm_);
}

}  // namespace pkv
