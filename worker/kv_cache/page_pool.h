// Allocator of the worker's KV pages (ids 0..num_pages-1) with reference counts, and the index of
// the prefix cache (vLLM's automatic prefix caching, nano-vllm's block manager): a full page whose
// K/V is written can be published under its PageHash (prefix_hash.h); later sequences with the
// same prefix look it up and share it by refcount instead of recomputing it. Not thread-safe:
// owned by the scheduler thread.
//
// Page states:
//   free       refcount 0, no hash: on the free list;
//   held       refcount > 0 (with or without a hash);
//   evictable  refcount 0 with a hash: its K/V is kept for future hits, on an LRU list.
// Allocate() takes free pages first, then evicts the least recently released evictable page (its
// hash is dropped); a held page is never evicted. A published page stays registered until evicted.
//
// Ledger (RELIABILITY.md I2): allocs_total - frees_total == num_used() at all times, and
// num_used() + num_free() == num_pages(), where num_free() counts free AND evictable pages (both
// are what an Allocate can hand out, so admission and watermarks count them as available). An
// "alloc" is any 0 -> 1 refcount transition (Allocate, or Retain of an evictable page on a hit); a
// "free" any 1 -> 0 transition. At idle num_free() == num_pages().
//
// Misuse by the caller (releasing a free page, retaining a free uncached page, an id out of range,
// a negative count, publishing a page nobody holds) is a broken invariant, not bad input: it
// PKV_CHECK-aborts.
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "worker/kv_cache/prefix_hash.h"

namespace pkv {

class PagePool {
 public:
  // REQUIRES: num_pages >= 0.
  explicit PagePool(int32_t num_pages);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int32_t num_pages() const { return static_cast<int32_t>(refcounts_.size()); }
  // Pages an Allocate can hand out: free plus evictable.
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size() + lru_.size()); }
  int32_t num_used() const { return num_pages() - num_free(); }
  // Cached pages nobody holds (a subset of num_free()).
  int32_t num_evictable() const { return static_cast<int32_t>(lru_.size()); }
  // Pages registered in the prefix cache, held or evictable.
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }

  // Allocates `n` pages (refcount 1 each, no hash) and appends their ids to `out`; all or nothing.
  // Free pages go first, then evictable ones, least recently released first. Returns false (and
  // changes nothing) when fewer than n pages are free or evictable. REQUIRES: n >= 0.
  bool Allocate(int32_t n, std::vector<int32_t>* out);
  // Adds a holder to a held page, or takes an evictable page off the LRU list (a cache hit).
  void Retain(int32_t page);
  // Drops a holder. At 0 a cached page becomes evictable (most recently released end of the LRU
  // list), any other page free. PKV_CHECKs against underflow and out-of-range ids.
  void Release(int32_t page);
  int32_t RefCount(int32_t page) const;

  // The page cached under `hash` (held or evictable), or -1.
  int32_t Lookup(const PageHash& hash) const;
  // Registers held `page`, whose K/V for the prefix `hash` names is fully written. Returns false
  // and changes nothing when the hash already names another page (two sequences computed the same
  // prefix concurrently; this copy stays private and is freed normally) or the page already has a
  // hash. REQUIRES: RefCount(page) > 0.
  bool Publish(int32_t page, const PageHash& hash);
  bool IsCached(int32_t page) const;

  uint64_t allocs_total() const { return allocs_total_; }
  uint64_t frees_total() const { return frees_total_; }
  // Evictable pages reclaimed by Allocate.
  uint64_t evictions_total() const { return evictions_total_; }

 private:
  void CheckId(int32_t page) const;
  int32_t TakeFreePage();  // REQUIRES: num_free() > 0

  std::vector<int32_t> refcounts_;  // [num_pages]
  // LIFO of free (uncached) page ids: a just-freed page is reused first (it is likely still in L2
  // on the GPU, and tests see reuse quickly). Initially ordered so pages go out 0, 1, 2, ...
  std::vector<int32_t> free_list_;  // [num_free - num_evictable]
  // Evictable pages, least recently released at the front.
  std::list<int32_t> lru_;
  std::vector<std::list<int32_t>::iterator> lru_pos_;  // [num_pages] valid while evictable
  std::vector<PageHash> hash_of_;                      // [num_pages] valid while cached_[page]
  std::vector<bool> cached_;                           // [num_pages]
  absl::flat_hash_map<PageHash, int32_t> by_hash_;     // hash -> cached page
  uint64_t allocs_total_ = 0;
  uint64_t frees_total_ = 0;
  uint64_t evictions_total_ = 0;
};

}  // namespace pkv
