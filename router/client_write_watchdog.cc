#include "router/client_write_watchdog.h"

#include <utility>

namespace pkv::router {

ClientWriteWatchdog::ClientWriteWatchdog(TimerThread* timers, absl::Duration limit,
                                         grpc::CallbackServerContext* ctx,
                                         std::function<void()> on_fire)
    : timers_(timers), limit_(limit), state_(std::make_shared<State>()) {
  state_->ctx = limit > absl::ZeroDuration() ? ctx : nullptr;
  state_->on_fire = std::move(on_fire);
}

void ClientWriteWatchdog::ArmLocked(TimerThread* timers, absl::Duration limit,
                                    const std::shared_ptr<State>& state, absl::Time when) {
  state->timer = timers->Schedule(when, [timers, limit, state] { OnTimer(timers, limit, state); });
}

void ClientWriteWatchdog::WriteStarted() {
  std::lock_guard<std::recursive_mutex> lock(state_->mu);
  if (state_->ctx == nullptr) return;
  state_->outstanding_since = absl::Now();
  // One pending timer per stream; when it fires it re-arms for the write outstanding then.
  if (state_->timer == 0) ArmLocked(timers_, limit_, state_, state_->outstanding_since + limit_);
}

void ClientWriteWatchdog::WriteDone() {
  std::lock_guard<std::recursive_mutex> lock(state_->mu);
  state_->outstanding_since = absl::InfiniteFuture();
}

void ClientWriteWatchdog::Stop() {
  TimerThread::TimerId timer = 0;
  {
    std::lock_guard<std::recursive_mutex> lock(state_->mu);
    state_->ctx = nullptr;
    timer = std::exchange(state_->timer, 0);
  }
  if (timer != 0) timers_->Cancel(timer);
}

void ClientWriteWatchdog::OnTimer(TimerThread* timers, absl::Duration limit,
                                  const std::shared_ptr<State>& state) {
  std::lock_guard<std::recursive_mutex> lock(state->mu);
  state->timer = 0;
  if (state->ctx == nullptr || state->outstanding_since == absl::InfiniteFuture()) return;
  const absl::Time due = state->outstanding_since + limit;
  if (absl::Now() < due) {
    ArmLocked(timers, limit, state, due);  // a later write is outstanding; check it when due
    return;
  }
  grpc::CallbackServerContext* ctx = std::exchange(state->ctx, nullptr);
  if (state->on_fire) state->on_fire();
  // Under the state lock so the context cannot go away meanwhile: OnDone (maybe run inline by
  // TryCancel, on this thread) calls Stop(), which takes this recursive lock.
  ctx->TryCancel();
}

}  // namespace pkv::router
