// Continuous-batching scheduler of one worker (vLLM/nano-vllm style), owned by the worker's
// scheduler thread. Not thread-safe.
//
// Each step, Schedule() builds a batch under two budgets:
//  - every running sequence that is fully prefilled decodes one token;
//  - prefill (new and partially prefilled sequences) is chunked so the step feeds at most
//    `max_batch_tokens` tokens in total (chunked prefill);
//  - a waiting sequence is admitted (FCFS within priority) only while free pages cover its next
//    chunk plus a reserve of `watermark_pages` and `max_running` is not reached;
//  - when a running sequence needs a page and none is free, the most recently admitted running
//    sequence is preempted by recompute: its pages are released, num_computed reset to 0, and it
//    goes back to the front of the waiting queue (its generated tokens kept, so greedy output is
//    unchanged). The preemption counter is incremented.
// Pages for every token fed in the step are allocated by Schedule() before it returns, so the
// backend can write K/V without further checks.
//
// Bounded admission: Add() refuses with RESOURCE_EXHAUSTED when `max_waiting` sequences wait or the
// waiting prompt tokens would exceed `max_queued_tokens`, and with INVALID_ARGUMENT when the
// sequence could never fit the pool (prompt + max_tokens pages > total pages).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/kv_cache/page_pool.h"
#include "worker/scheduler/sequence.h"

namespace pkv {

struct SchedulerConfig {
  int32_t page_size = 16;
  int32_t max_batch_tokens = 512;  // tokens fed per step (decode rows count one each)
  int32_t max_running = 64;        // sequences in the running batch
  int32_t max_waiting = 256;       // queued sequences (bounded admission)
  int64_t max_queued_tokens = 1 << 20;
  int32_t watermark_pages = 0;     // pages kept free when admitting new sequences
};

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

  // Queues a new sequence (state kWaiting). See the header comment for the refusals.
  absl::Status Add(std::unique_ptr<Sequence> seq);

  // Builds the next step's batch. Sequences whose deadline is before `now` are removed first
  // (pages released) and returned through `expired`.
  ScheduledBatch Schedule(absl::Time now, std::vector<DroppedSequence>* expired);

  // After the backend ran `batch`: advances num_computed of every item and appends
  // `sampled[k]` to the k-th item with sample == true.
  void CommitStep(const ScheduledBatch& batch, const std::vector<int32_t>& sampled);

  // Removes a finished sequence (after CommitStep), releasing its pages. Returns it, or nullptr
  // if unknown.
  std::unique_ptr<Sequence> Finish(uint64_t seq_id);
  // Removes a sequence in any state (abort/cancel), releasing its pages; nullptr if unknown.
  std::unique_ptr<Sequence> Abort(uint64_t seq_id);

  int32_t num_running() const;
  int32_t num_waiting() const;
  int64_t num_queued_tokens() const;  // uncomputed prompt tokens of waiting + running sequences
  uint64_t num_preemptions() const { return num_preemptions_; }
  bool idle() const { return num_running() == 0 && num_waiting() == 0; }
  const SchedulerConfig& config() const { return config_; }

 private:
  SchedulerConfig config_;
  PagePool* pool_;
  // Implementation-defined containers (helper fills in); kept private.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  uint64_t num_preemptions_ = 0;
};

}  // namespace pkv
