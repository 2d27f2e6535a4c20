#include "router/admission.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pkv::router {

AdmissionController::AdmissionController(int max_inflight, int max_queue,
                                         absl::Duration queue_timeout, TimerThread* timers,
                                         ChangeCallback on_change)
    : max_inflight_(max_inflight),
      max_queue_(max_queue),
      queue_timeout_(queue_timeout),
      timers_(timers),
      on_change_(std::move(on_change)) {}

void AdmissionController::set_max_queued_tokens(int64_t max_tokens) {
  absl::MutexLock lock(&mu_);
  max_queued_tokens_ = max_tokens;
}

AdmissionController::Result AdmissionController::Acquire(GrantCallback on_grant, int64_t tokens) {
  absl::MutexLock lock(&mu_);
  // Waiters go first: a new arrival never overtakes the queue.
  if (inflight_ < max_inflight_ && waiters_.empty()) {
    ++inflight_;
    NotifyLocked();
    return {Outcome::kAdmitted, 0};
  }
  if (static_cast<int>(waiters_.size()) >= max_queue_ ||
      queued_tokens_ + tokens > max_queued_tokens_) {
    return {Outcome::kRejected, 0};
  }
  const uint64_t ticket = next_ticket_++;
  // Lock order admission -> timer is safe: the timer thread runs OnTimeout outside its own lock,
  // and OnTimeout only looks once we drop ours, so the waiter is in the list by then.
  const TimerThread::TimerId timer =
      timers_->ScheduleAfter(queue_timeout_, [this, ticket] { OnTimeout(ticket); });
  waiters_.push_back(Waiter{ticket, tokens, std::move(on_grant), timer});
  queued_tokens_ += tokens;
  NotifyLocked();
  return {Outcome::kQueued, ticket};
}

bool AdmissionController::CancelWait(uint64_t ticket) {
  TimerThread::TimerId timer = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.begin();
    while (it != waiters_.end() && it->ticket != ticket) ++it;
    if (it == waiters_.end()) return false;
    timer = it->timer;
    queued_tokens_ -= it->tokens;
    waiters_.erase(it);
    NotifyLocked();
  }
  timers_->Cancel(timer);
  return true;
}

void AdmissionController::Release() {
  GrantCallback granted;
  TimerThread::TimerId timer = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!waiters_.empty()) {
      // The slot passes straight to the oldest waiter: inflight_ is unchanged.
      granted = std::move(waiters_.front().on_grant);
      timer = waiters_.front().timer;
      queued_tokens_ -= waiters_.front().tokens;
      waiters_.pop_front();
    } else {
      --inflight_;
    }
    NotifyLocked();
  }
  if (granted) {
    timers_->Cancel(timer);
    granted(absl::OkStatus());
  }
}

void AdmissionController::OnTimeout(uint64_t ticket) {
  GrantCallback expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->ticket != ticket) continue;
      expired = std::move(it->on_grant);
      queued_tokens_ -= it->tokens;
      waiters_.erase(it);
      NotifyLocked();
      break;
    }
  }
  if (expired) {
    expired(absl::ResourceExhaustedError(absl::StrCat(
        "router admission queue: no slot within ", absl::ToInt64Milliseconds(queue_timeout_),
        " ms (", max_inflight_, " streams in flight); retry later")));
  }
}

int AdmissionController::inflight() const {
  absl::MutexLock lock(&mu_);
  return inflight_;
}

int AdmissionController::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

int64_t AdmissionController::queued_tokens() const {
  absl::MutexLock lock(&mu_);
  return queued_tokens_;
}

void AdmissionController::NotifyLocked() {
  if (on_change_) on_change_(inflight_, static_cast<int>(waiters_.size()));
}

}  // namespace pkv::router
