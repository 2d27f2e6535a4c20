#include "worker/parallel/rank_threads.h"

#include "common/status_macros.h"

namespace pkv {

RankThreads::RankThreads(int world_size) : world_size_(world_size), results_(world_size) {
  PKV_CHECK(world_size >= 1);
  threads_.reserve(world_size - 1);
  for (int r = 1; r < world_size; ++r) threads_.emplace_back([this, r] { Loop(r); });
}

RankThreads::~RankThreads() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    start_cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

absl::Status RankThreads::Run(absl::FunctionRef<absl::Status(int rank)> fn) {
  if (world_size_ > 1) {
    absl::MutexLock lock(&mu_);
    fn_ = &fn;
    pending_ = world_size_ - 1;
    ++run_id_;
    start_cv_.SignalAll();
  }
  results_[0] = fn(0);
  if (world_size_ > 1) {
    absl::MutexLock lock(&mu_);
    while (pending_ > 0) done_cv_.Wait(&mu_);
    fn_ = nullptr;
  }
  for (const absl::Status& s : results_) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void RankThreads::Loop(int rank) {
  uint64_t seen = 0;
  while (true) {
    const absl::FunctionRef<absl::Status(int)>* fn = nullptr;
    {
      absl::MutexLock lock(&mu_);
      while (run_id_ == seen && !stop_) start_cv_.Wait(&mu_);
      if (stop_) return;
      seen = run_id_;
      fn = fn_;
    }
    // results_[rank] is this thread's alone; the mutex below publishes it to Run().
    results_[rank] = (*fn)(rank);
    absl::MutexLock lock(&mu_);
    if (--pending_ == 0) done_cv_.Signal();
  }
}

}  // namespace pkv
