// Continuous-batching scheduler of one worker (vLLM/nano-vllm style), owned by the worker's
// scheduler thread. Not thread-safe.
//
// Each step, Schedule() builds a batch under two budgets:
//  - sequences past their deadline are dropped first (waiting or running; pages released);
//  - every running sequence that is fully prefilled decodes one token (decode rows come first in
//    the batch and in the token budget);
//  - then running sequences still prefilling continue, in admission order;
//  - prefill (new and partially prefilled sequences) is chunked so the step feeds at most
//    `max_batch_tokens` tokens in total (chunked prefill): a chunk is min(uncomputed tokens,
//    remaining budget), shrunk further to the room free pages give a running sequence;
//  - a waiting sequence is admitted (preempted ones first, then highest priority, FCFS within a
//    priority) only while free pages cover its next chunk plus a reserve of `watermark_pages` and
//    `max_running` is not reached. No admission happens in a step that preempted (the freed pages
//    are what the running batch just ran out of; re-admitting would thrash);
//  - when a running sequence needs a page and none is free, the most recently admitted running
//    sequence is preempted by recompute: its pages are released, num_computed reset to 0, and it
//    goes back to the front of the waiting queue (its generated tokens kept, so greedy output is
//    unchanged). The preemption counter is incremented. If that sequence is the one asking, it
//    just goes back. A victim already placed in this step's batch is taken out of it.
// Pages for every token fed in the step are allocated by Schedule() before it returns, so the
// backend can write K/V without further checks.
//
// Step pipelining (the engine's overlap_steps): a step may be committed as soon as it is
// launched, its sampled tokens kPendingToken, and the next step scheduled while it runs. A
// pending token is only ever a sequence's last, which no page hash covers until it is known (a
// page is published when its positions are computed, and the pending token is the one the next
// step feeds; MatchCachedPrefix stops before the last token's page). A sequence whose pending
// token is its max_tokens-th is not scheduled again. Pages published at a launch are read only by
// later steps on the same device stream, after the launched step wrote them.
//
// Prefix caching (config.prefix_caching; PagePool and prefix_hash.h hold the mechanics):
//  - when a waiting sequence is admitted with nothing computed (new, preempted or migrated), the
//    longest run of its full pages found in the cache, chained hashes compared from the first
//    page, is shared into its block table and counted as computed; its first chunk starts after
//    them. At most (num_tokens - 1) / page_size pages are taken, so at least the last token is
//    always computed (its logits are sampled) and the page it lands in is a private one: a cached
//    page is never written. Pages taken off the evictable list count against the free pages the
//    admission check needs;
//  - after a step is committed, every page of a fed sequence that became full (prompt or decode
//    pages alike, so a conversation's next turn hits its previous reply) is published;
//  - in-flight prefixes (prefix_wait_in_flight): a waiting sequence whose first uncached full page
//    is one a running sequence is still prefilling (same chained hash, not yet written) is passed
//    over this step, and later waiting sequences may be admitted before it; it is admitted once
//    that page is published (then hits it) or no running sequence computes it any more (finished,
//    aborted, preempted). A burst of requests sharing a cold prompt then computes it once, not
//    once per request: 48 chat turns behind one 2048-token system prompt, arriving together,
//    prefill 2048 + 48 x (their own tails) tokens instead of 48 x 2048 + .... Never when the batch
//    would otherwise be empty (progress);
//  - the prefix_cache_queries / _hits counters add, at each such admission, the sequence's tokens
//    and the tokens found cached (vLLM's prefix_cache_queries / prefix_cache_hits).
// The planning happens here, once per worker, so every tensor-parallel rank sees the same pages.
//
// Progress: the earliest admitted running sequence can preempt every later one, and Add() refuses
// sequences that could never fit the pool, so it always advances; when the batch would be empty
// while sequences wait, the first waiting one is admitted even below the watermark (its chunk
// shrunk to the free pages). Decode rows always fit the token budget because max_running is
// clamped to max_batch_tokens.
//
// Bounded admission: Add() refuses with RESOURCE_EXHAUSTED when `max_waiting` sequences wait or the
// queued tokens (num_queued_tokens() plus the new prompt) would exceed `max_queued_tokens`, and
// with INVALID_ARGUMENT when the sequence could never fit the pool (prompt + max_tokens pages >
// total pages) or is malformed (empty prompt, duplicate id, ...).
//
// Pointer lifetime: Sequence pointers in a ScheduledBatch stay valid until the sequence is
// finished, aborted or expired. Do not Finish/Abort a sequence of a batch between Schedule() and
// its CommitStep() unless the step is abandoned (CommitStep never called for it; the pages it
// allocated stay with their sequences and are reused by the next step).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/kv_cache/page_pool.h"
#include "worker/kv_cache/prefix_hash.h"
#include "worker/scheduler/sequence.h"

namespace pkv {

struct SchedulerConfig {
  int32_t page_size = 16;
  int32_t max_batch_tokens = 512;      // tokens fed per step (decode rows count one each)
  int32_t max_running = 64;            // sequences in the running batch
  int32_t max_waiting = 256;           // queued sequences (bounded admission)
  int64_t max_queued_tokens = 262144;  // prompt tokens waiting (bounded admission)
  int32_t watermark_pages = 0;         // pages kept free when admitting new sequences
  bool prefix_caching = true;          // share full pages across sequences by prefix hash
  // With prefix_caching: a waiting sequence whose next uncached full page is being prefilled by a
  // running one waits for it instead of computing the same page in parallel ("Prefix caching").
  bool prefix_wait_in_flight = true;
  // Seed of the page hashes: identifies everything besides the tokens that changes the K/V
  // (PrefixCacheSalt of the model identity, KV dtype, page size). Set by the engine.
  uint64_t prefix_cache_salt = 0;
};

// OK when every field is usable (positive sizes and limits, non-negative watermark); else
// INVALID_ARGUMENT naming the field. The worker calls it on its flags; the Scheduler constructor
// PKV_CHECKs it.
absl::Status ValidateSchedulerConfig(const SchedulerConfig& config);

// One sequence's share of a step.
struct ScheduledItem {
  Sequence* seq = nullptr;
  int32_t start_pos = 0;       // == seq->num_computed before the step
  int32_t num_new_tokens = 0;  // tokens fed this step: seq->tokens[start_pos, start_pos + n)
  bool sample = false;         // true when this step completes the sequence's uncomputed tokens
};

struct ScheduledBatch {
  std::vector<ScheduledItem> items;  // decode items first, then prefill chunks
  int32_t num_decode = 0;
  int32_t num_prefill_tokens = 0;
  bool empty() const { return items.empty(); }
};

// Why a sequence left the scheduler without finishing normally.
struct DroppedSequence {
  std::unique_ptr<Sequence> seq;
  absl::Status reason;  // DEADLINE_EXCEEDED for expired ones
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, PagePool* pool);  // pool must outlive the scheduler
  ~Scheduler();

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a new sequence (state kWaiting; num_computed and num_preemptions reset to 0). See the
  // header comment for the refusals; a refused sequence is destroyed (it holds no pages), so a
  // caller that may retry keeps its own copy. REQUIRES: seq != nullptr, seq->blocks holds no pages.
  absl::Status Add(std::unique_ptr<Sequence> seq);

  // Builds the next step's batch. Sequences whose deadline is before `now` are removed first
  // (pages released, state kFinished) and appended to `expired`; when `expired` is null they are
  // destroyed.
  ScheduledBatch Schedule(absl::Time now, std::vector<DroppedSequence>* expired);

  // After the backend ran (or launched) `batch`: advances num_computed of every item and appends
  // `sampled[k]` to the k-th item with sample == true (kPendingToken while the step runs: the
  // engine writes the id over it when the step finishes). Items whose seq is null (finished or
  // aborted since the launch) are skipped. REQUIRES: `batch` is the latest Schedule() result, not
  // yet committed, and sampled.size() equals its number of sample items.
  void CommitStep(const ScheduledBatch& batch, const std::vector<int32_t>& sampled);

  // Removes a finished sequence (after CommitStep), releasing its pages; state becomes kFinished.
  // Returns it, or nullptr if unknown.
  std::unique_ptr<Sequence> Finish(uint64_t seq_id);
  // Removes a sequence in any state (abort/cancel), releasing its pages; nullptr if unknown.
  std::unique_ptr<Sequence> Abort(uint64_t seq_id);

  int32_t num_running() const;
  int32_t num_waiting() const;
  // Uncomputed tokens of waiting sequences plus uncomputed prompt tokens of running ones.
  int64_t num_queued_tokens() const;
  uint64_t num_preemptions() const { return num_preemptions_; }
  // Prefix cache counters in tokens, since start (see the header comment).
  uint64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  uint64_t prefix_cache_hits() const { return prefix_cache_hits_; }
  bool idle() const { return num_running() == 0 && num_waiting() == 0; }
  const SchedulerConfig& config() const { return config_; }

 private:
  struct StepBuilder;  // one Schedule() call's batch under construction (schedule_step.cc)
  struct AdmitPlan;    // how a waiting sequence would start (schedule_step.cc)

  // scheduler.cc: queues.
  void InsertWaiting(std::unique_ptr<Sequence> seq);
  std::unique_ptr<Sequence> Remove(uint64_t seq_id);
  void DropExpired(absl::Time now, std::vector<DroppedSequence>* expired);
  bool Contains(uint64_t seq_id) const;
  // schedule_step.cc: the three phases of a step and preemption.
  void ScheduleDecodes(StepBuilder* step);
  void ScheduleRunningPrefills(StepBuilder* step);
  void AdmitWaiting(StepBuilder* step);
  bool PlanAdmission(Sequence* seq, const StepBuilder& step, AdmitPlan* plan);
  int32_t FitChunk(Sequence* seq, int32_t wanted, StepBuilder* step);
  bool PreemptLatest(const Sequence* requester, StepBuilder* step);
  // prefix_cache.cc: the longest cached run of `seq`'s full pages (not retained), and publishing
  // the pages a committed step filled.
  std::vector<int32_t> MatchCachedPrefix(Sequence* seq);
  // The hashes of the full prompt pages running sequences have yet to write (their pending
  // prompt pages); AddInFlightPages adds one sequence's.
  void AddInFlightPages(Sequence* seq, absl::flat_hash_set<PageHash>* in_flight);
  // True when `seq`'s first page after `num_hits` cached ones is in `in_flight`.
  bool WaitsForInFlightPage(const Sequence& seq, size_t num_hits,
                            const absl::flat_hash_set<PageHash>& in_flight) const;
  void AdoptCachedPrefix(Sequence* seq, const std::vector<int32_t>& pages);
  void PublishFullPages(Sequence* seq);

  SchedulerConfig config_;
  int32_t max_running_;  // min(max_running, max_batch_tokens): every decode row fits the budget
  PagePool* pool_;       // not owned
  // Admission order: sequences preempted (most recent victim last pushed, at the front), then the
  // rest by priority descending, FCFS within a priority.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  // In admission order: back() is the most recently admitted (the preemption victim).
  std::vector<std::unique_ptr<Sequence>> running_;
  uint64_t num_preemptions_ = 0;
  uint64_t prefix_cache_queries_ = 0;
  uint64_t prefix_cache_hits_ = 0;
};

}  // namespace pkv
