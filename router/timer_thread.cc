#include "router/timer_thread.h"

namespace pkv::router {

TimerThread::TimerThread() : thread_([this] { Loop(); }) {}

TimerThread::~TimerThread() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

TimerThread::TimerId TimerThread::Schedule(absl::Time when, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  const TimerId id = next_id_++;
  queue_.emplace(std::make_pair(when, id), std::move(fn));
  due_by_id_.emplace(id, when);
  return id;
}

bool TimerThread::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto it = due_by_id_.find(id);
  if (it == due_by_id_.end()) return false;
  queue_.erase(std::make_pair(it->second, id));
  due_by_id_.erase(it);
  return true;
}

void TimerThread::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (queue_.empty()) {
      // Woken by Schedule (new front) or the destructor through the condition.
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&wake));
      continue;
    }
    const absl::Time due = queue_.begin()->first.first;
    if (absl::Now() < due) {
      // Wake early when something earlier is scheduled or we are stopping.
      auto changed = [this, due]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || (!queue_.empty() && queue_.begin()->first.first < due);
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), due);
      continue;
    }
    auto node = queue_.extract(queue_.begin());
    due_by_id_.erase(node.key().second);
    std::function<void()> fn = std::move(node.mapped());
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
}

}  // namespace pkv::router
