// One scheduling step: decode rows, then continuing prefill chunks of running sequences, then
// admission of waiting ones; preemption by recompute when a running sequence finds no free page.
// See scheduler.h for the policy; this file is its mechanics.
#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "worker/kv_cache/block_table.h"
#include "worker/scheduler/scheduler.h"

namespace pkv {

// The batch of one Schedule() call while it is being built. Decode and prefill items are kept
// apart so decode rows lead the batch whatever order they were scheduled in.
struct Scheduler::StepBuilder {
  std::vector<ScheduledItem> decode;
  std::vector<ScheduledItem> prefill;
  int32_t budget = 0;      // tokens still allowed this step
  bool preempted = false;  // a preemption happened; admission is skipped
  bool empty() const { return decode.empty() && prefill.empty(); }
};

namespace {

// A running sequence decodes when its prompt is in the cache and only the last sampled token is
// still to feed (that token may still be pending: step pipelining). A recomputing sequence
// (preempted, re-admitted) prefills until it is there.
bool IsDecoding(const Sequence& seq) {
  return seq.num_computed >= seq.num_prompt_tokens && seq.num_uncomputed() == 1;
}

ScheduledItem MakeItem(Sequence* seq, int32_t num_new_tokens) {
  ScheduledItem item;
  item.seq = seq;
  item.start_pos = seq->num_computed;
  item.num_new_tokens = num_new_tokens;
  item.sample = seq->num_computed + num_new_tokens == seq->num_tokens();
  return item;
}

// Removes `seq`'s item from `items` (at most one) and returns the tokens it had reserved.
int32_t EraseItem(const Sequence* seq, std::vector<ScheduledItem>* items) {
  auto it = std::find_if(items->begin(), items->end(),
                         [&](const ScheduledItem& item) { return item.seq == seq; });
  if (it == items->end()) return 0;
  const int32_t tokens = it->num_new_tokens;
  items->erase(it);
  return tokens;
}

}  // namespace

ScheduledBatch Scheduler::Schedule(absl::Time now, std::vector<DroppedSequence>* expired) {
  DropExpired(now, expired);
  StepBuilder step;
  step.budget = config_.max_batch_tokens;
  ScheduleDecodes(&step);
  ScheduleRunningPrefills(&step);
  if (!step.preempted) AdmitWaiting(&step);

  ScheduledBatch batch;
  batch.num_decode = static_cast<int32_t>(step.decode.size());
  batch.items = std::move(step.decode);
  for (const ScheduledItem& item : step.prefill) {
    batch.num_prefill_tokens += item.num_new_tokens;
    batch.items.push_back(item);
  }
  return batch;
}

// Every decoding sequence feeds its one uncomputed token. They are visited in admission order and
// victims are taken from the back, so a victim is never one already scheduled in this phase.
void Scheduler::ScheduleDecodes(StepBuilder* step) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* seq = running_[i].get();
    // A sequence whose last token (pending) is its last to generate waits for the engine to
    // finish it; with steps not pipelined it is finished before the next Schedule().
    if (!IsDecoding(*seq) || seq->generation_done()) continue;
    // max_running_ <= max_batch_tokens, so decode rows alone never exhaust the budget.
    PKV_CHECK(step->budget > 0);
    if (FitChunk(seq, 1, step) == 0) break;  // seq was the latest admitted and went back
    step->decode.push_back(MakeItem(seq, 1));
    --step->budget;
  }
}

// Running sequences still prefilling (or recomputing) get the next chunk, in admission order.
void Scheduler::ScheduleRunningPrefills(StepBuilder* step) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* seq = running_[i].get();
    if (IsDecoding(*seq) || seq->num_uncomputed() == 0) continue;
    if (step->budget == 0) break;
    const int32_t n = FitChunk(seq, std::min(seq->num_uncomputed(), step->budget), step);
    if (n == 0) break;  // seq was the latest admitted and went back
    step->prefill.push_back(MakeItem(seq, n));
    step->budget -= n;
  }
}

// How a waiting sequence starts if admitted now: the cached pages it shares (prefix cache) and
// the tokens of its first chunk, which starts right after them.
struct Scheduler::AdmitPlan {
  std::vector<int32_t> hits;
  int32_t num_new_tokens = 0;
};

// Admits from the front of the waiting queue while the budget, max_running and the free pages
// (next chunk + watermark) allow. Stops at the first that does not fit (FCFS), except that an
// otherwise empty batch always takes the first one, shrunk to the free pages. The one skip: a
// sequence whose next uncached page a running sequence is prefilling waits (scheduler.h).
void Scheduler::AdmitWaiting(StepBuilder* step) {
  const int32_t page_size = config_.page_size;
  const bool wait_in_flight = config_.prefix_caching && config_.prefix_wait_in_flight;
  absl::flat_hash_set<PageHash> in_flight;  // pending prompt pages of the running sequences
  if (wait_in_flight) {
    for (const auto& seq : running_) AddInFlightPages(seq.get(), &in_flight);
  }
  size_t next = 0;  // waiting_[0, next) are passed over this step (they wait on in-flight pages)
  while (next < waiting_.size() && num_running() < max_running_ && step->budget > 0) {
    Sequence* seq = waiting_[next].get();
    AdmitPlan plan;
    if (!PlanAdmission(seq, *step, &plan)) break;
    if (wait_in_flight && !step->empty() &&
        WaitsForInFlightPage(*seq, plan.hits.size(), in_flight)) {
      ++next;
      continue;
    }
    AdoptCachedPrefix(seq, plan.hits);
    const int32_t n = plan.num_new_tokens;
    PKV_CHECK(seq->blocks.EnsureCapacity(seq->num_computed + n, page_size, pool_));
    seq->state = SequenceState::kRunning;
    running_.push_back(std::move(waiting_[next]));
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(next));
    if (wait_in_flight) AddInFlightPages(seq, &in_flight);
    // A hit can leave only the last sampled token of a resumed or preempted sequence to feed: a
    // decode-shaped row, so it joins the decode rows.
    (IsDecoding(*seq) ? step->decode : step->prefill).push_back(MakeItem(seq, n));
    step->budget -= n;
  }
}

// Pages taken off the evictable list by a hit are no longer free, so they count against the
// chunk's pages. Progress guarantee: with nothing else in the batch the sequence gets every free
// page; if the hits themselves are the only free pages it forgoes them and recomputes.
bool Scheduler::PlanAdmission(Sequence* seq, const StepBuilder& step, AdmitPlan* plan) {
  const int32_t page_size = config_.page_size;
  plan->hits = MatchCachedPrefix(seq);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int32_t num_hits = static_cast<int32_t>(plan->hits.size());
    const auto revived = std::count_if(plan->hits.begin(), plan->hits.end(),
                                       [&](int32_t page) { return pool_->RefCount(page) == 0; });
    const int64_t available = pool_->num_free() - revived;
    const int32_t start = num_hits * page_size;
    const int32_t n = std::min(seq->num_tokens() - start, step.budget);
    const int64_t needed = PagesForTokens(start + n, page_size) - num_hits;
    if (needed + config_.watermark_pages <= available) {
      plan->num_new_tokens = n;
      return true;
    }
    if (!step.empty()) return false;
    if (available > 0) {
      plan->num_new_tokens = static_cast<int32_t>(std::min<int64_t>(n, available * page_size));
      return true;
    }
    plan->hits.clear();
  }
  return false;
}

// Reserves pages so running `seq` can feed up to `wanted` more tokens and returns how many it may
// feed: `wanted`, or fewer when only that much room is left in its pages plus the free pages.
// With no room at all, preempts the latest admitted sequence and retries; returns 0 when that was
// `seq` itself.
int32_t Scheduler::FitChunk(Sequence* seq, int32_t wanted, StepBuilder* step) {
  const int32_t page_size = config_.page_size;
  while (true) {
    const int64_t room =
        int64_t{seq->blocks.num_pages() + pool_->num_free()} * page_size - seq->num_computed;
    if (room > 0) {
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(wanted, room));
      PKV_CHECK(seq->blocks.EnsureCapacity(seq->num_computed + n, page_size, pool_));
      return n;
    }
    if (!PreemptLatest(seq, step)) return 0;
  }
}

// Preempts by recompute the most recently admitted running sequence: drops it from this step's
// batch, releases its pages, resets num_computed and puts it at the front of the waiting queue
// (its tokens, prompt and generated, are kept). Returns false when the victim is `requester`.
bool Scheduler::PreemptLatest(const Sequence* requester, StepBuilder* step) {
  PKV_CHECK(!running_.empty());
  std::unique_ptr<Sequence> victim = std::move(running_.back());
  running_.pop_back();
  // With the current rules a victim never holds a decode item when a prefill preempts (an
  // earlier-admitted sequence cannot still be prefilling once a later one decodes), but the batch
  // must not keep an item of a sequence without pages if those rules change.
  step->budget += EraseItem(victim.get(), &step->decode);
  step->budget += EraseItem(victim.get(), &step->prefill);
  victim->blocks.ReleaseAll(pool_);
  victim->num_computed = 0;
  victim->num_published_pages = 0;
  victim->state = SequenceState::kWaiting;
  ++victim->num_preemptions;
  ++num_preemptions_;
  step->preempted = true;
  const bool is_requester = victim.get() == requester;
  waiting_.push_front(std::move(victim));
  return !is_requester;
}

void Scheduler::CommitStep(const ScheduledBatch& batch, const std::vector<int32_t>& sampled) {
  const auto num_samples = std::count_if(batch.items.begin(), batch.items.end(),
                                         [](const ScheduledItem& item) { return item.sample; });
  PKV_CHECK_MSG(static_cast<size_t>(num_samples) == sampled.size(),
                "CommitStep: one sampled token per sample item");
  size_t k = 0;
  for (const ScheduledItem& item : batch.items) {
    Sequence* seq = item.seq;
    if (seq == nullptr) {  // finished or aborted since its step was launched
      if (item.sample) ++k;
      continue;
    }
    PKV_CHECK_MSG(seq->state == SequenceState::kRunning && seq->num_computed == item.start_pos,
                  "CommitStep of a batch that is not the latest scheduled one");
    seq->num_computed += item.num_new_tokens;
    PKV_CHECK(seq->blocks.Capacity(config_.page_size) >= seq->num_computed);
    if (item.sample) seq->tokens.push_back(sampled[k++]);
    PublishFullPages(seq);
  }
}

}  // namespace pkv
