// Scheduler queues: admission control (Add), removal (Finish, Abort, deadline expiry) and the
// load counters. The per-step batch building lives in schedule_step.cc.
#include "worker/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/kv_cache/block_table.h"

namespace pkv {

absl::Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  auto positive = [](const char* name, int64_t v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("scheduler ", name, " must be > 0, got ", v));
  };
  PKV_RETURN_IF_ERROR(positive("page_size", c.page_size));
  PKV_RETURN_IF_ERROR(positive("max_batch_tokens", c.max_batch_tokens));
  PKV_RETURN_IF_ERROR(positive("max_running", c.max_running));
  PKV_RETURN_IF_ERROR(positive("max_waiting", c.max_waiting));
  PKV_RETURN_IF_ERROR(positive("max_queued_tokens", c.max_queued_tokens));
  if (c.watermark_pages < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler watermark_pages must be >= 0, got ", c.watermark_pages));
  }
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerConfig& config, PagePool* pool)
    : config_(config),
      max_running_(std::min(config.max_running, config.max_batch_tokens)),
      pool_(pool) {
  PKV_CHECK_MSG(pool_ != nullptr, "Scheduler needs a page pool");
  PKV_CHECK_MSG(ValidateSchedulerConfig(config_).ok(), "invalid SchedulerConfig");
}

Scheduler::~Scheduler() {
  for (auto& seq : running_) seq->blocks.ReleaseAll(pool_);
  for (auto& seq : waiting_) seq->blocks.ReleaseAll(pool_);
}

absl::Status Scheduler::Add(std::unique_ptr<Sequence> seq) {
  PKV_CHECK_MSG(seq != nullptr, "Add(nullptr)");
  PKV_CHECK_MSG(seq->blocks.num_pages() == 0, "Add() of a sequence that holds pages");
  if (seq->num_prompt_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", seq->id, " has an empty prompt"));
  }
  if (seq->num_prompt_tokens > seq->num_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", seq->id, " says ", seq->num_prompt_tokens,
                     " prompt tokens but has ", seq->num_tokens(), " tokens"));
  }
  if (seq->params.max_tokens < 1 || seq->num_generated() >= seq->params.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", seq->id, " has max_tokens ", seq->params.max_tokens, " with ",
                     seq->num_generated(), " tokens already generated; nothing left to generate"));
  }
  const int64_t max_total = int64_t{seq->num_prompt_tokens} + seq->params.max_tokens;
  const int64_t pages = PagesForTokens(max_total, config_.page_size);
  if (pages > pool_->num_pages()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt + max_tokens = ", max_total, " tokens need ", pages, " KV pages of ",
        config_.page_size, " tokens, but the worker has only ", pool_->num_pages(), " pages"));
  }
  if (Contains(seq->id)) {
    return absl::InvalidArgumentError(absl::StrCat("sequence id ", seq->id, " already queued"));
  }
  if (num_waiting() >= config_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("waiting queue full: max_waiting = ", config_.max_waiting, " sequences"));
  }
  const int64_t queued = num_queued_tokens() + seq->num_tokens();
  if (queued > config_.max_queued_tokens) {
    return absl::ResourceExhaustedError(
        absl::StrCat("queued tokens would reach ", queued,
                     ", over max_queued_tokens = ", config_.max_queued_tokens));
  }
  seq->num_computed = 0;
  seq->num_preemptions = 0;
  seq->page_hashes.clear();
  seq->num_published_pages = 0;
  seq->num_cached_tokens = 0;
  seq->state = SequenceState::kWaiting;
  InsertWaiting(std::move(seq));
  return absl::OkStatus();
}

// Waiting order: preempted sequences (a prefix, pushed to the front by PreemptLatest), then by
// priority descending, FCFS within a priority. A new sequence goes after every preempted one and
// every one of priority >= its own.
void Scheduler::InsertWaiting(std::unique_ptr<Sequence> seq) {
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& other) {
    return other->num_preemptions == 0 && other->priority < seq->priority;
  });
  waiting_.insert(pos, std::move(seq));
}

bool Scheduler::Contains(uint64_t seq_id) const {
  auto same = [&](const auto& s) { return s->id == seq_id; };
  return std::any_of(running_.begin(), running_.end(), same) ||
         std::any_of(waiting_.begin(), waiting_.end(), same);
}

std::unique_ptr<Sequence> Scheduler::Remove(uint64_t seq_id) {
  std::unique_ptr<Sequence> out;
  auto same = [&](const auto& s) { return s->id == seq_id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), same); it != running_.end()) {
    out = std::move(*it);
    running_.erase(it);  // keeps admission order
  } else if (auto wit = std::find_if(waiting_.begin(), waiting_.end(), same);
             wit != waiting_.end()) {
    out = std::move(*wit);
    waiting_.erase(wit);
  } else {
    return nullptr;
  }
  out->blocks.ReleaseAll(pool_);
  out->state = SequenceState::kFinished;
  return out;
}

std::unique_ptr<Sequence> Scheduler::Finish(uint64_t seq_id) { return Remove(seq_id); }

std::unique_ptr<Sequence> Scheduler::Abort(uint64_t seq_id) { return Remove(seq_id); }

void Scheduler::DropExpired(absl::Time now, std::vector<DroppedSequence>* expired) {
  std::vector<uint64_t> ids;
  for (const auto& s : running_)
    if (s->deadline < now) ids.push_back(s->id);
  for (const auto& s : waiting_)
    if (s->deadline < now) ids.push_back(s->id);
  for (uint64_t id : ids) {
    std::unique_ptr<Sequence> seq = Remove(id);
    if (expired == nullptr) continue;
    absl::Status reason = absl::DeadlineExceededError(
        absl::StrCat("sequence ", seq->id, " passed its deadline after ", seq->num_generated(),
                     " generated tokens"));
    expired->push_back(DroppedSequence{std::move(seq), std::move(reason)});
  }
}

int32_t Scheduler::num_running() const { return static_cast<int32_t>(running_.size()); }

int32_t Scheduler::num_waiting() const { return static_cast<int32_t>(waiting_.size()); }

int64_t Scheduler::num_queued_tokens() const {
  int64_t total = 0;
  for (const auto& s : waiting_) total += s->num_uncomputed();
  for (const auto& s : running_) total += std::max(0, s->num_prompt_tokens - s->num_computed);
  return total;
}

}  // namespace pkv
