// Test helpers for the scheduler: sequence factory, a deterministic fake "model", and a driver
// that runs one step (schedule, check page coverage, commit, finish what reached max_tokens).
// The fake model's token for a sequence depends only on (sequence id, generated index), so a
// sequence's output is the same whether it ran alone, batched, or preempted and recomputed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/kv_cache/block_table.h"
#include "worker/scheduler/scheduler.h"

namespace pkv::test {

inline int32_t FakeToken(uint64_t id, int32_t index) {
  return static_cast<int32_t>((id * 1000003u + static_cast<uint64_t>(index) * 7919u) % 50021u);
}

// The tokens a sequence generates when run to completion: FakeToken(id, 0..max_tokens-1).
inline std::vector<int32_t> ExpectedOutput(uint64_t id, int32_t max_tokens) {
  std::vector<int32_t> out;
  for (int32_t g = 0; g < max_tokens; ++g) out.push_back(FakeToken(id, g));
  return out;
}

inline std::unique_ptr<Sequence> MakeSeq(uint64_t id, int32_t prompt_len, int32_t max_tokens,
                                         int32_t priority = 0) {
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  for (int32_t i = 0; i < prompt_len; ++i) seq->tokens.push_back(FakeToken(id + 0x5eed, i));
  seq->num_prompt_tokens = prompt_len;
  seq->params.max_tokens = max_tokens;
  seq->priority = priority;
  return seq;
}

// One scheduled item, copied out so it survives the sequence being finished.
struct ItemRecord {
  uint64_t id = 0;
  int32_t start_pos = 0;
  int32_t num_new_tokens = 0;
  bool sample = false;
};

// Drives a Scheduler the way the worker does and keeps raw pointers to the live sequences.
class Driver {
 public:
  Driver(const SchedulerConfig& config, int32_t num_pages)
      : pool_(num_pages), sched_(config, &pool_) {}

  // Adds a sequence and tracks it when accepted.
  absl::Status Add(std::unique_ptr<Sequence> seq) {
    Sequence* raw = seq.get();
    absl::Status status = sched_.Add(std::move(seq));
    if (status.ok()) live_[raw->id] = raw;
    return status;
  }

  // Schedule + coverage check + fake-model commit + Finish of sequences at max_tokens.
  std::vector<ItemRecord> Step(absl::Time now = absl::UnixEpoch()) {
    std::vector<DroppedSequence> expired;
    ScheduledBatch batch = sched_.Schedule(now, &expired);
    for (DroppedSequence& d : expired) {
      live_.erase(d.seq->id);
      dropped_.push_back(std::move(d));
    }
    ExpectWellFormed(batch);
    std::vector<ItemRecord> records;
    std::vector<int32_t> sampled;
    const int32_t page_size = sched_.config().page_size;
    for (const ScheduledItem& item : batch.items) {
      EXPECT_GE(item.seq->blocks.Capacity(page_size), int64_t{item.start_pos} + item.num_new_tokens)
          << "seq " << item.seq->id << " fed tokens beyond its pages";
      records.push_back({item.seq->id, item.start_pos, item.num_new_tokens, item.sample});
      if (item.sample) sampled.push_back(FakeToken(item.seq->id, item.seq->num_generated()));
    }
    sched_.CommitStep(batch, sampled);
    for (const ScheduledItem& item : batch.items) {
      Sequence* seq = item.seq;
      if (seq->num_generated() < seq->params.max_tokens) continue;
      std::unique_ptr<Sequence> done = sched_.Finish(seq->id);
      EXPECT_NE(done, nullptr);
      live_.erase(done->id);
      finished_.push_back(std::move(done));
    }
    return records;
  }

  // Batch shape: decode rows (one token, the last sampled, past the prompt) first, then prefill
  // chunks; counters match; the token budget holds; each item starts at num_computed.
  void ExpectWellFormed(const ScheduledBatch& batch) const {
    int32_t total = 0, prefill = 0;
    for (size_t i = 0; i < batch.items.size(); ++i) {
      const ScheduledItem& item = batch.items[i];
      const Sequence& seq = *item.seq;
      const bool decode_shaped =
          item.start_pos >= seq.num_prompt_tokens && item.start_pos + 1 == seq.num_tokens();
      EXPECT_EQ(item.start_pos, seq.num_computed);
      EXPECT_GT(item.num_new_tokens, 0);
      EXPECT_LE(item.start_pos + item.num_new_tokens, seq.num_tokens());
      EXPECT_EQ(item.sample, item.start_pos + item.num_new_tokens == seq.num_tokens());
      if (static_cast<int32_t>(i) < batch.num_decode) {
        EXPECT_TRUE(decode_shaped) << "decode row " << i << " of seq " << seq.id;
      } else {
        EXPECT_FALSE(decode_shaped) << "decode-shaped row " << i << " after the decode rows";
        prefill += item.num_new_tokens;
      }
      total += item.num_new_tokens;
    }
    EXPECT_EQ(prefill, batch.num_prefill_tokens);
    EXPECT_LE(total, sched_.config().max_batch_tokens);
  }

  // Uncomputed tokens of every live sequence: the work a step could feed.
  int64_t PendingTokens() const {
    int64_t total = 0;
    for (const auto& [id, seq] : live_) total += seq->num_uncomputed();
    return total;
  }

  // Pages held by the live sequences (must equal pool().num_used()).
  int64_t PagesHeld() const {
    int64_t total = 0;
    for (const auto& [id, seq] : live_) total += seq->blocks.num_pages();
    return total;
  }

  void ExpectLedger() const {
    EXPECT_EQ(PagesHeld(), pool_.num_used());
    EXPECT_EQ(pool_.allocs_total() - pool_.frees_total(), static_cast<uint64_t>(pool_.num_used()));
  }

  Sequence* seq(uint64_t id) const {
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : it->second;
  }
  void Forget(uint64_t id) { live_.erase(id); }

  PagePool& pool() { return pool_; }
  Scheduler& sched() { return sched_; }
  std::vector<std::unique_ptr<Sequence>>& finished() { return finished_; }
  std::vector<DroppedSequence>& dropped() { return dropped_; }

 private:
  PagePool pool_;
  Scheduler sched_;
  std::map<uint64_t, Sequence*> live_;
  std::vector<std::unique_ptr<Sequence>> finished_;
  std::vector<DroppedSequence> dropped_;
};

inline SchedulerConfig MakeConfig(int32_t page_size, int32_t max_batch_tokens,
                                  int32_t max_running = 64) {
  SchedulerConfig config;
  config.page_size = page_size;
  config.max_batch_tokens = max_batch_tokens;
  config.max_running = max_running;
  return config;
}

}  // namespace pkv::test
