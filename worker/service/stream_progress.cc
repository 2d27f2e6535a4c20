#include "worker/service/stream_progress.h"

#include <utility>

namespace pkv {
namespace {

// A prune scans the whole table, so it runs once per this many Adds (and the table holds at most
// about a minute of streams).
constexpr size_t kPruneEvery = 256;

}  // namespace

void StreamProgressTable::Add(const std::string& request_id,
                              std::shared_ptr<StreamProgress> progress) {
  absl::MutexLock lock(&mu_);
  if (++adds_since_prune_ >= kPruneEvery) {
    adds_since_prune_ = 0;
    PruneLocked(absl::Now());
  }
  by_id_[request_id] = std::move(progress);
}

std::optional<StreamProgressTable::Answer> StreamProgressTable::Lookup(
    const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(request_id);
  if (it == by_id_.end()) return std::nullopt;
  const int64_t finished_at = it->second->finished_at_ns.load();
  if (finished_at != 0 && absl::FromUnixNanos(finished_at) + kRetention < absl::Now()) {
    return std::nullopt;
  }
  return Answer{it->second->tokens_produced.load(), finished_at != 0};
}

size_t StreamProgressTable::size() const {
  absl::MutexLock lock(&mu_);
  return by_id_.size();
}

void StreamProgressTable::PruneLocked(absl::Time now) {
  const int64_t cutoff = absl::ToUnixNanos(now - kRetention);
  absl::erase_if(by_id_, [cutoff](const auto& entry) {
    const int64_t finished_at = entry.second->finished_at_ns.load();
    return finished_at != 0 && finished_at < cutoff;
  });
}

}  // namespace pkv
