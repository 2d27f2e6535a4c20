#include "worker/engine/sink_relay.h"

#include <utility>

namespace pkv {

SinkRelay::SinkRelay(size_t capacity) : capacity_(capacity), thread_([this] { Loop(); }) {}

SinkRelay::~SinkRelay() { Shutdown(); }

void SinkRelay::Post(absl::AnyInvocable<void() &&> call) {
  {
    absl::MutexLock lock(&mu_);
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopped_ || queue_.size() < capacity_;
    };
    mu_.Await(absl::Condition(&room));
    if (!stopped_) {
      queue_.push_back(std::move(call));
      return;
    }
  }
  std::move(call)();  // the relay has stopped: deliver on the caller's thread
}

void SinkRelay::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SinkRelay::Loop() {
  while (true) {
    absl::AnyInvocable<void() &&> call;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) {  // stopping, and everything posted has run
        stopped_ = true;
        return;
      }
      call = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(call)();
  }
}

void RelayedSink::OnAccepted(const std::vector<int32_t>& prompt_token_ids) {
  relay_->Post([sink = sink_, ids = prompt_token_ids]() { sink->OnAccepted(ids); });
}

void RelayedSink::OnChunk(pkv::v1::Chunk chunk) {
  relay_->Post([sink = sink_, c = std::move(chunk)]() mutable { sink->OnChunk(std::move(c)); });
}

void RelayedSink::OnComplete(pkv::v1::Complete complete) {
  relay_->Post(
      [sink = sink_, c = std::move(complete)]() mutable { sink->OnComplete(std::move(c)); });
}

void RelayedSink::OnError(const absl::Status& status) {
  relay_->Post([sink = sink_, status]() { sink->OnError(status); });
}

}  // namespace pkv
