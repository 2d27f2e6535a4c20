#include "router/request_table.h"

#include "absl/strings/str_format.h"

namespace pkv::router {

uint64_t RequestTable::Add(const std::string& request_id, AbortableStream* stream) {
  absl::MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  ++live_;
  by_id_[request_id] = Entry{handle, stream};
  return handle;
}

void RequestTable::Remove(uint64_t handle, const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  --live_;
  auto it = by_id_.find(request_id);
  // Another live stream may have taken over the id; leave its entry alone.
  if (it != by_id_.end() && it->second.handle == handle) by_id_.erase(it);
}

bool RequestTable::Abort(const std::string& request_id) {
  AbortableStream* stream = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(request_id);
    if (it == by_id_.end()) return false;
    stream = it->second.stream;
    // Registered streams are alive (Remove comes before their last reference goes); the stream
    // takes its own lock, which may call back into this table, so it is called unlocked.
    stream->Ref();
  }
  const bool aborted = stream->AbortByRequest(request_id);
  stream->Unref();
  return aborted;
}

int RequestTable::live_streams() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

bool RequestTable::WaitUntilEmpty(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto empty = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return live_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&empty), deadline);
}

void LiveCounter::Increment() {
  absl::MutexLock lock(&mu_);
  ++count_;
}

void LiveCounter::Decrement() {
  absl::MutexLock lock(&mu_);
  --count_;
}

int LiveCounter::value() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

bool LiveCounter::WaitForZero(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto zero = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return count_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&zero), deadline);
}

uint64_t IdSource::NextRandom() {
  // splitmix64 (Steele, Lea, Flood 2014): a bijective mix of key + counter * golden gamma.
  uint64_t z = key_ + (counter_.fetch_add(1) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string IdSource::NextRequestId() { return absl::StrFormat("r-%016x", NextRandom()); }

}  // namespace pkv::router
