#include "worker/parallel/shared_device_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pkv {

class SharedDeviceGroup::Rank : public DeviceCommunicator {
 public:
  Rank(SharedDeviceGroup* group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  std::string transport() const override {
    return absl::StrCat("shared device ", group_->device_, " (host-ordered streams)");
  }
  int device() const override { return group_->device_; }
  cudaStream_t stream() const override { return group_->streams_[rank_]; }
  bool capturable() const override { return false; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    return group_->AllReduceSum(rank_, data, count, CollectiveDType::kFloat32);
  }
  absl::Status AllReduceSum(void* data, int64_t count, CollectiveDType type) override {
    return group_->AllReduceSum(rank_, data, count, type);
  }
  absl::Status AllGather(const float* send, int64_t count, float* recv) override {
    return group_->AllGather(rank_, send, count, recv);
  }
  absl::Status Barrier() override {
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
    return group_->host_->rank(rank_)->Barrier();
  }
  void Abort() override { group_->Abort(absl::StrCat("rank ", rank_, " aborted")); }

 private:
  SharedDeviceGroup* group_;
  int rank_;
};

absl::StatusOr<std::unique_ptr<SharedDeviceGroup>> SharedDeviceGroup::Create(
    int device, const std::vector<cudaStream_t>& streams) {
  const int n = static_cast<int>(streams.size());
  if (n < 1 || n > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shared-device group has 1 to ", kMaxRanks, " ranks, got ", n));
  }
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<InProcessGroup> host, InProcessGroup::Create(n));
  std::unique_ptr<SharedDeviceGroup> g(new SharedDeviceGroup(device, streams, std::move(host)));
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  for (int r = 0; r < n; ++r) {
    PKV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&g->ready_[r], cudaEventDisableTiming));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&g->done_[r], cudaEventDisableTiming));
  }
  return g;
}

SharedDeviceGroup::SharedDeviceGroup(int device, std::vector<cudaStream_t> streams,
                                     std::unique_ptr<InProcessGroup> host)
    : device_(device),
      streams_(std::move(streams)),
      host_(std::move(host)),
      ready_(streams_.size(), nullptr),
      done_(streams_.size(), nullptr),
      ptrs_(streams_.size(), nullptr),
      counts_(streams_.size(), 0) {
  for (int r = 0; r < world_size(); ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

SharedDeviceGroup::~SharedDeviceGroup() {
  for (std::vector<cudaEvent_t>* events : {&ready_, &done_}) {
    for (cudaEvent_t e : *events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
}

DeviceCommunicator* SharedDeviceGroup::rank(int r) const {
  PKV_CHECK(r >= 0 && r < world_size());
  return ranks_[r].get();
}

void SharedDeviceGroup::Abort(const std::string& reason) { host_->Abort(reason); }

absl::Status SharedDeviceGroup::Enter(int r, void* ptr, int64_t count) {
  ptrs_[r] = ptr;
  counts_[r] = count;
  PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready_[r], streams_[r]));
  PKV_RETURN_IF_ERROR(host_->rank(r)->Barrier());
  for (int q = 0; q < world_size(); ++q) {
    PKV_CHECK_MSG(counts_[q] == count, "ranks entered a collective with different counts");
    if (q != r) PKV_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(streams_[r], ready_[q], 0));
  }
  return absl::OkStatus();
}

absl::Status SharedDeviceGroup::Leave(int r) {
  PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_[r], streams_[r]));
  PKV_RETURN_IF_ERROR(host_->rank(r)->Barrier());
  for (int q = 0; q < world_size(); ++q) {
    if (q != r) PKV_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(streams_[r], done_[q], 0));
  }
  return absl::OkStatus();
}

absl::Status SharedDeviceGroup::AllReduceSum(int r, void* data, int64_t count,
                                             CollectiveDType type) {
  if (world_size() == 1 || count == 0) return absl::OkStatus();
  PKV_RETURN_IF_ERROR(Enter(r, data, count));
  const int64_t chunk = (count + world_size() - 1) / world_size();
  const int64_t begin = std::min(count, r * chunk), end = std::min(count, begin + chunk);
  if (end > begin) {
    // ptrs_ is stable until the barrier in Leave(): every rank is inside this collective.
    PKV_RETURN_IF_ERROR(
        LaunchSharedSliceSum(ptrs_.data(), world_size(), begin, end, type, streams_[r]));
  }
  return Leave(r);
}

absl::Status SharedDeviceGroup::AllGather(int r, const float* send, int64_t count, float* recv) {
  if (count == 0) return absl::OkStatus();
  PKV_RETURN_IF_ERROR(Enter(r, const_cast<float*>(send), count));
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  for (int q = 0; q < world_size(); ++q) {
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(recv + q * count, ptrs_[q], bytes, cudaMemcpyDeviceToDevice, streams_[r]));
  }
  return Leave(r);
}

}  // namespace pkv
