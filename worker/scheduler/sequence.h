// One request's state inside a worker: its tokens (prompt, then generated), how many of them have
// K/V in the cache, its pages, and its sampling parameters. Owned by the Scheduler; pointers handed
// out by Schedule() stay valid until the sequence is finished or aborted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/kv_cache/block_table.h"
#include "worker/model/sampling_params.h"

namespace pkv {

enum class SequenceState { kWaiting, kRunning, kFinished };

// The value of a generated token whose step is launched but not finished (step pipelining): the
// scheduler commits a launched step at once, so the next step can be scheduled while it runs, and
// the engine writes the sampled id over it when the step finishes. Only ever the last token.
inline constexpr int32_t kPendingToken = -1;

struct Sequence {
  uint64_t id = 0;  // unique within the worker, assigned by the engine
  std::string request_id;
  // Prompt tokens followed by generated ones. Tokens resumed from another worker (migration) are
  // generated tokens: they count against max_tokens.
  std::vector<int32_t> tokens;
  int32_t num_prompt_tokens = 0;
  // Tokens whose K/V are written to the cache. Prefill advances this by chunks; decode by one.
  // Preemption resets it to 0 (recompute).
  int32_t num_computed = 0;
  BlockTable blocks;
  SamplingParams params;
  int32_t priority = 0;
  absl::Time arrival_time;
  absl::Time deadline = absl::InfiniteFuture();
  SequenceState state = SequenceState::kWaiting;
  int32_t num_preemptions = 0;
  // Prefix cache (scheduler.h "Prefix caching"). page_hashes[i] is the chained hash of full page i
  // of `tokens` (computed lazily; valid for life since tokens only grow). The first
  // num_published_pages pages of `blocks` are in the cache (published or shared on a hit).
  std::vector<PageHash> page_hashes;
  int32_t num_published_pages = 0;
  // Prompt tokens whose K/V came from the prefix cache at the latest admission (Complete's
  // cached_tokens): a preempted sequence re-admitted reports the hits of its re-admission, a
  // migrated one (resume_token_ids) those of the worker it finished on.
  int32_t num_cached_tokens = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_generated() const { return num_tokens() - num_prompt_tokens; }
  // Generated max_tokens (the last may be pending): nothing more to schedule; the engine finishes
  // it once that token is known.
  bool generation_done() const { return num_generated() >= params.max_tokens; }
  // Tokens still to feed before the next sample (>= 1 while running).
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
};

}  // namespace pkv
