// A RequestSink for engine tests that records what a request's sink receives (prompt, token ids,
// log-probabilities, text, the terminal message) for reading from the test thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/engine/request_sink.h"

namespace pkv::testing {

class RecordingSink : public RequestSink {
 public:
  void OnAccepted(const std::vector<int32_t>& prompt) override {
    absl::MutexLock lock(&mu_);
    accepted_ = prompt;
  }
  void OnChunk(pkv::v1::Chunk chunk) override {
    absl::MutexLock lock(&mu_);
    for (uint32_t id : chunk.token_ids()) tokens_.push_back(static_cast<int32_t>(id));
    for (const auto& lp : chunk.logprobs()) logprobs_.push_back(lp.logprob());
    text_ += chunk.text();
  }
  void OnComplete(pkv::v1::Complete complete) override {
    absl::MutexLock lock(&mu_);
    complete_ = std::move(complete);
    done_.Notify();
  }
  void OnError(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    error_ = status;
    done_.Notify();
  }
  bool Healthy() const override { return true; }

  bool WaitDone() { return done_.WaitForNotificationWithTimeout(absl::Seconds(60)); }
  std::vector<int32_t> accepted() const { return Locked(accepted_); }
  std::vector<int32_t> tokens() const { return Locked(tokens_); }
  std::vector<float> logprobs() const { return Locked(logprobs_); }
  std::string text() const { return Locked(text_); }
  pkv::v1::Complete complete() const { return Locked(complete_); }
  absl::Status error() const { return Locked(error_); }

 private:
  template <typename T>
  T Locked(const T& field) const {
    absl::MutexLock lock(&mu_);
    return field;
  }
  mutable absl::Mutex mu_;
  absl::Notification done_;
  std::vector<int32_t> accepted_;
  std::vector<int32_t> tokens_;
  std::vector<float> logprobs_;
  std::string text_;
  pkv::v1::Complete complete_;
  absl::Status error_;
};

}  // namespace pkv::testing
