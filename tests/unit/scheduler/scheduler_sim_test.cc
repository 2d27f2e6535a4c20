// Randomized simulation of the scheduler with a fake model over a fake KV cache. Small pools
// force preemption; random arrivals, aborts, deadlines and a small bounded queue exercise every
// path. Checked after every step:
//  - ledger: distinct pages held by live sequences == pool.num_used() == allocs - frees; a page's
//    refcount is its number of holders (half the prompts start with one of a few shared prefixes,
//    so the prefix cache shares pages across sequences);
//  - every scheduled item's pages cover start_pos + num_new_tokens;
//  - the fake KV holds, at every position a sampling row reads, exactly that sequence's token
//    (so pages were neither lost nor shared across a preemption/recompute, and every page taken
//    from the prefix cache holds exactly the prefix its hash names);
//  - the batch is non-empty whenever a sequence is queued (no deadlock).
// The fake model samples a hash of the tokens it read back from the KV cache, so a sequence's
// output equals what it would produce alone only if every step read the right K/V.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/scheduler/scheduler_test_util.h"

namespace pkv {
namespace {

int32_t HashTokens(const std::vector<int32_t>& tokens, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the token values
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint32_t>(tokens[i])) * 1099511628211ull;
  return static_cast<int32_t>(h % 32000);
}

// What the sequence generates when it runs alone: each token hashes everything before it.
std::vector<int32_t> AloneOutput(std::vector<int32_t> tokens, int32_t max_tokens) {
  const size_t prompt = tokens.size();
  for (int32_t g = 0; g < max_tokens; ++g) tokens.push_back(HashTokens(tokens, tokens.size()));
  return std::vector<int32_t>(tokens.begin() + prompt, tokens.end());
}

class Simulation {
 public:
  explicit Simulation(uint32_t seed) : rng_(seed) {
    config_.page_size = 1 + rng_() % 8;
    config_.max_batch_tokens = 4 + rng_() % 60;
    config_.max_running = 1 + rng_() % 12;
    config_.max_waiting = 4 + rng_() % 30;
    config_.max_queued_tokens = 200 + rng_() % 2000;
    config_.watermark_pages = rng_() % 3;
    config_.prefix_caching = seed % 4 != 0;  // a quarter of the runs without the prefix cache
    num_pages_ = 6 + rng_() % 30;
    pool_ = std::make_unique<PagePool>(num_pages_);
    sched_ = std::make_unique<Scheduler>(config_, pool_.get());
    kv_.assign(static_cast<size_t>(num_pages_) * config_.page_size, -1);
  }

  void Run() {
    MakeArrivals(60);
    int64_t bound = 0;  // steps: arrival window + one token of progress per step (see below)
    for (const auto& a : arrivals_) bound += a.spec.num_tokens() + a.spec.params.max_tokens;
    bound = 2 * (bound + 200);
    int64_t step = 0;
    for (; step < bound && !(arrivals_.empty() && sched_->idle()); ++step) RunStep(step);
    EXPECT_TRUE(arrivals_.empty() && sched_->idle()) << "not done after " << step << " steps";
    EXPECT_EQ(pool_->num_used(), 0);
    EXPECT_EQ(pool_->num_free(), num_pages_);
    EXPECT_EQ(pool_->allocs_total(), pool_->frees_total());
    EXPECT_EQ(num_finished_ + num_aborted_ + num_expired_ + num_rejected_, 60);
  }

  uint64_t num_preemptions() const { return sched_->num_preemptions(); }
  uint64_t prefix_cache_hits() const { return sched_->prefix_cache_hits(); }

 private:
  struct Arrival {
    int64_t step;
    Sequence spec;  // copied into a fresh Sequence per Add() attempt (Add consumes it)
  };

  static std::unique_ptr<Sequence> FromSpec(const Sequence& spec) {
    auto seq = std::make_unique<Sequence>();
    seq->id = spec.id;
    seq->tokens = spec.tokens;
    seq->num_prompt_tokens = spec.num_prompt_tokens;
    seq->params = spec.params;
    seq->priority = spec.priority;
    seq->deadline = spec.deadline;
    return seq;
  }

  void MakeArrivals(int n) {
    for (int i = 0; i < n; ++i) {
      Arrival a;
      a.step = rng_() % 80;
      a.spec.id = static_cast<uint64_t>(i + 1);
      // Lengths scale with the pool so most fit and several sequences compete for it; one in
      // twenty could never fit and must be refused.
      const int32_t capacity = num_pages_ * config_.page_size;
      const bool oversized = rng_() % 20 == 0;
      const int32_t prompt = oversized ? capacity : 1 + rng_() % std::min(48, capacity / 2);
      // Half start with one of three shared prefixes (system prompts), cut to the prompt's length.
      const int32_t shared = rng_() % 2 == 0 ? prompt : 0;
      const uint32_t which = rng_() % 3;
      for (int32_t t = 0; t < shared; ++t) a.spec.tokens.push_back((which * 7919 + t * 31) % 32000);
      for (int32_t t = shared; t < prompt; ++t) a.spec.tokens.push_back(rng_() % 32000);
      a.spec.num_prompt_tokens = prompt;
      a.spec.params.max_tokens = 1 + rng_() % std::min(24, capacity / 2);
      a.spec.priority = rng_() % 3;
      if (rng_() % 10 == 0)
        a.spec.deadline = absl::UnixEpoch() + absl::Seconds(a.step + rng_() % 150);
      arrivals_.push_back(std::move(a));
    }
    std::stable_sort(arrivals_.begin(), arrivals_.end(),
                     [](const Arrival& a, const Arrival& b) { return a.step < b.step; });
  }

  // Adds due arrivals in order; a RESOURCE_EXHAUSTED one (queue full) is retried next step.
  void AddArrivals(int64_t step) {
    while (!arrivals_.empty() && arrivals_.front().step <= step) {
      const Sequence& spec = arrivals_.front().spec;
      const int64_t pages = PagesForTokens(int64_t{spec.num_prompt_tokens} + spec.params.max_tokens,
                                           config_.page_size);
      std::unique_ptr<Sequence> seq = FromSpec(spec);
      Sequence* raw = seq.get();
      absl::Status status = sched_->Add(std::move(seq));
      if (status.code() == absl::StatusCode::kResourceExhausted) return;
      if (pages > num_pages_) {
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
        ++num_rejected_;
      } else {
        ASSERT_TRUE(status.ok()) << status;
        live_[spec.id] = raw;
        expected_[spec.id] = AloneOutput(spec.tokens, spec.params.max_tokens);
      }
      arrivals_.pop_front();
    }
  }

  void MaybeAbort() {
    if (live_.empty() || rng_() % 60 != 0) return;
    auto it = std::next(live_.begin(), rng_() % live_.size());
    std::unique_ptr<Sequence> seq = sched_->Abort(it->first);
    ASSERT_NE(seq, nullptr);
    EXPECT_EQ(seq->blocks.num_pages(), 0);
    live_.erase(it);
    ++num_aborted_;
  }

  void RunStep(int64_t step) {
    AddArrivals(step);
    MaybeAbort();
    const absl::Time now = absl::UnixEpoch() + absl::Seconds(step);
    std::vector<DroppedSequence> expired;
    ScheduledBatch batch = sched_->Schedule(now, &expired);
    for (const DroppedSequence& d : expired) {
      EXPECT_LT(d.seq->deadline, now);
      EXPECT_EQ(d.reason.code(), absl::StatusCode::kDeadlineExceeded);
      live_.erase(d.seq->id);
      ++num_expired_;
    }
    if (!sched_->idle()) {
      ASSERT_FALSE(batch.empty()) << "deadlock at step " << step;
    }
    CheckPages();
    std::vector<int32_t> sampled;
    for (const ScheduledItem& item : batch.items) RunItem(item, &sampled);
    sched_->CommitStep(batch, sampled);
    for (const ScheduledItem& item : batch.items) {
      Sequence* seq = item.seq;
      if (seq->num_generated() < seq->params.max_tokens) continue;
      const std::vector<int32_t> generated(seq->tokens.begin() + seq->num_prompt_tokens,
                                           seq->tokens.end());
      EXPECT_EQ(generated, expected_[seq->id]) << "seq " << seq->id;
      live_.erase(seq->id);
      ASSERT_NE(sched_->Finish(seq->id), nullptr);
      ++num_finished_;
    }
  }

  // The fake model: writes the fed tokens into the KV slots their pages map to; a sampling row
  // reads back every position before it and samples the hash of what it read.
  void RunItem(const ScheduledItem& item, std::vector<int32_t>* sampled) {
    const Sequence& seq = *item.seq;
    const int32_t ps = config_.page_size;
    const int32_t end = item.start_pos + item.num_new_tokens;
    ASSERT_GE(seq.blocks.Capacity(ps), end) << "pages do not cover the item";
    auto slot = [&](int32_t pos) { return int64_t{seq.blocks.pages()[pos / ps]} * ps + pos % ps; };
    for (int32_t pos = item.start_pos; pos < end; ++pos) kv_[slot(pos)] = seq.tokens[pos];
    if (!item.sample) return;
    std::vector<int32_t> read(end);
    for (int32_t pos = 0; pos < end; ++pos) read[pos] = kv_[slot(pos)];
    for (int32_t pos = 0; pos < end; ++pos)
      ASSERT_EQ(read[pos], seq.tokens[pos]) << "seq " << seq.id << " reads a stale KV slot";
    sampled->push_back(HashTokens(read, read.size()));
  }

  void CheckPages() {
    std::map<int32_t, int32_t> holders;
    for (const auto& [id, seq] : live_) {
      for (int32_t page : seq->blocks.pages()) ++holders[page];
    }
    for (const auto& [page, n] : holders) ASSERT_EQ(pool_->RefCount(page), n) << "page " << page;
    ASSERT_EQ(static_cast<int64_t>(holders.size()), pool_->num_used());
    ASSERT_EQ(pool_->allocs_total() - pool_->frees_total(),
              static_cast<uint64_t>(pool_->num_used()));
  }

  std::mt19937 rng_;
  SchedulerConfig config_;
  int32_t num_pages_ = 0;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<Scheduler> sched_;  // destroyed before pool_
  std::vector<int32_t> kv_;           // [num_pages * page_size] the token each slot holds
  std::deque<Arrival> arrivals_;
  std::map<uint64_t, Sequence*> live_;
  std::map<uint64_t, std::vector<int32_t>> expected_;
  int num_finished_ = 0, num_aborted_ = 0, num_expired_ = 0, num_rejected_ = 0;
};

TEST(SchedulerSimTest, RandomWorkloadsStayConsistentAndFinish) {
  uint64_t total_preemptions = 0, total_hits = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    Simulation sim(seed);
    sim.Run();
    total_preemptions += sim.num_preemptions();
    total_hits += sim.prefix_cache_hits();
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(total_preemptions, 0u) << "pools too large: preemption never exercised";
  EXPECT_GT(total_hits, 0u) << "the prefix cache was never hit";
}

}  // namespace
}  // namespace pkv
