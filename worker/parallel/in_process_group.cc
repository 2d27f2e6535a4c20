#include "worker/parallel/in_process_group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv {

class InProcessGroup::Rank : public Communicator {
 public:
  Rank(InProcessGroup* group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  std::string transport() const override { return "in-process"; }
  absl::Status AllReduceSum(float* data, int64_t count) override {
    return group_->AllReduceSum(rank_, data, count);
  }
  absl::Status AllGather(const float* send, int64_t count, float* recv) override {
    return group_->AllGather(rank_, send, count, recv);
  }
  absl::Status Barrier() override { return group_->Arrive(); }

 private:
  InProcessGroup* group_;
  int rank_;
};

absl::StatusOr<std::unique_ptr<InProcessGroup>> InProcessGroup::Create(int world_size) {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel world size must be in [1, ",
                                                   kMaxWorldSize, "], got ", world_size));
  }
  return std::unique_ptr<InProcessGroup>(new InProcessGroup(world_size));
}

InProcessGroup::InProcessGroup(int world_size)
    : world_size_(world_size),
      data_(world_size, nullptr),
      send_(world_size, nullptr),
      count_(world_size, 0) {
  for (int r = 0; r < world_size; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

InProcessGroup::~InProcessGroup() = default;

Communicator* InProcessGroup::rank(int r) const {
  PKV_CHECK(r >= 0 && r < world_size_);
  return ranks_[r].get();
}

void InProcessGroup::Abort(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (aborted_) return;
  aborted_ = true;
  abort_reason_ = reason;
  cv_.SignalAll();
}

absl::Status InProcessGroup::Arrive() {
  absl::MutexLock lock(&mu_);
  if (aborted_) return absl::AbortedError(abort_reason_);
  const uint64_t generation = generation_;
  if (++arrived_ == world_size_) {
    arrived_ = 0;
    ++generation_;
    cv_.SignalAll();
    return absl::OkStatus();
  }
  while (generation_ == generation && !aborted_) cv_.Wait(&mu_);
  if (generation_ == generation) return absl::AbortedError(abort_reason_);
  return absl::OkStatus();
}

void InProcessGroup::SliceOf(int64_t count, int world_size, int r, int64_t* begin, int64_t* end) {
  const int64_t chunk = (count + world_size - 1) / world_size;
  *begin = std::min(count, r * chunk);
  *end = std::min(count, *begin + chunk);
}

absl::Status InProcessGroup::AllReduceSum(int r, float* data, int64_t count) {
  if (world_size_ == 1) return absl::OkStatus();
  data_[r] = data;
  count_[r] = count;
  PKV_RETURN_IF_ERROR(Arrive());
  for (int other = 0; other < world_size_; ++other) {
    PKV_CHECK_MSG(count_[other] == count, "ranks entered AllReduceSum with different counts");
  }
  int64_t begin, end;
  SliceOf(count, world_size_, r, &begin, &end);
  // This rank owns elements [begin, end) of every rank's buffer until the next barrier: it reads
  // all of them before writing the sum back to all of them.
  for (int64_t i = begin; i < end; ++i) {
    float sum = data_[0][i];
    for (int other = 1; other < world_size_; ++other) sum += data_[other][i];
    for (int other = 0; other < world_size_; ++other) data_[other][i] = sum;
  }
  return Arrive();
}

absl::Status InProcessGroup::AllGather(int r, const float* send, int64_t count, float* recv) {
  send_[r] = send;
  data_[r] = recv;
  count_[r] = count;
  PKV_RETURN_IF_ERROR(Arrive());
  for (int other = 0; other < world_size_; ++other) {
    PKV_CHECK_MSG(count_[other] == count, "ranks entered AllGather with different counts");
  }
  // Rank r scatters its own send buffer into slot r of every rank's recv buffer.
  for (int other = 0; other < world_size_; ++other) {
    std::copy_n(send, count, data_[other] + r * count);
  }
  return Arrive();
}

}  // namespace pkv
