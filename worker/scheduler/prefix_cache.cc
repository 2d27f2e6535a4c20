// The scheduler's use of the prefix cache (scheduler.h "Prefix caching"): matching a waiting
// sequence's full pages against the cache, sharing the hits, and publishing the pages a committed
// step filled. The index itself lives in PagePool; the keys in prefix_hash.h.
#include <algorithm>

#include "common/status_macros.h"
#include "worker/kv_cache/prefix_hash.h"
#include "worker/scheduler/scheduler.h"

namespace pkv {

// Hashes are extended one page at a time, so a sequence whose first page misses costs one hash.
// At most (num_tokens - 1) / page_size pages match: the last token is always computed, and it
// lands in a page of its own that is never one of the shared ones.
std::vector<int32_t> Scheduler::MatchCachedPrefix(Sequence* seq) {
  std::vector<int32_t> pages;
  if (!config_.prefix_caching) return pages;
  const int32_t page_size = config_.page_size;
  const int32_t max_pages = (seq->num_tokens() - 1) / page_size;
  for (int32_t i = 0; i < max_pages; ++i) {
    ExtendPageHashes(seq->tokens, page_size, i + 1, config_.prefix_cache_salt, &seq->page_hashes);
    const int32_t page = pool_->Lookup(seq->page_hashes[i]);
    if (page < 0) break;
    pages.push_back(page);
  }
  return pages;
}

void Scheduler::AddInFlightPages(Sequence* seq, absl::flat_hash_set<PageHash>* in_flight) {
  const int32_t page_size = config_.page_size;
  const int32_t prompt_pages = seq->num_prompt_tokens / page_size;
  const int32_t written = seq->num_computed / page_size;
  if (written >= prompt_pages) return;
  ExtendPageHashes(seq->tokens, page_size, prompt_pages, config_.prefix_cache_salt,
                   &seq->page_hashes);
  for (int32_t i = written; i < prompt_pages; ++i) in_flight->insert(seq->page_hashes[i]);
}

bool Scheduler::WaitsForInFlightPage(const Sequence& seq, size_t num_hits,
                                     const absl::flat_hash_set<PageHash>& in_flight) const {
  // MatchCachedPrefix hashed up to and including the first page that missed (when there is one).
  return seq.page_hashes.size() > num_hits && in_flight.contains(seq.page_hashes[num_hits]);
}

void Scheduler::AdoptCachedPrefix(Sequence* seq, const std::vector<int32_t>& pages) {
  PKV_CHECK_MSG(seq->num_computed == 0 && seq->blocks.num_pages() == 0,
                "adopting a cached prefix into a sequence that already has K/V");
  if (!config_.prefix_caching) return;
  seq->blocks.AppendShared(pages, pool_);
  const int32_t num_pages = static_cast<int32_t>(pages.size());
  const int32_t cached = num_pages * config_.page_size;
  seq->num_computed = cached;
  seq->num_published_pages = num_pages;
  // Every admission overwrites it: after a preemption the prompt's K/V is rebuilt, and what the
  // finished stream was computed from is the last admission's (its hits included).
  seq->num_cached_tokens = std::min(cached, seq->num_prompt_tokens);
  prefix_cache_queries_ += static_cast<uint64_t>(seq->num_tokens());
  prefix_cache_hits_ += static_cast<uint64_t>(cached);
}

// A page is published once full and written: CommitStep runs after the backend wrote the step's
// K/V, or launched it (step pipelining: every reader of the page runs after it on the device),
// and num_computed counts exactly those positions.
void Scheduler::PublishFullPages(Sequence* seq) {
  if (!config_.prefix_caching) return;
  const int32_t page_size = config_.page_size;
  const int32_t full = seq->num_computed / page_size;
  if (full <= seq->num_published_pages) return;
  ExtendPageHashes(seq->tokens, page_size, full, config_.prefix_cache_salt, &seq->page_hashes);
  for (int32_t i = seq->num_published_pages; i < full; ++i) {
    // False when another sequence published the same prefix first: this copy stays private.
    pool_->Publish(seq->blocks.pages()[i], seq->page_hashes[i]);
  }
  seq->num_published_pages = full;
}

}  // namespace pkv
