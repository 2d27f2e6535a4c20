// Allocator of the worker's KV pages (ids 0..num_pages-1) with reference counts, so a page can be
// shared (prefix caching later) and is returned to the free list only when its last holder releases
// it. Not thread-safe: owned by the scheduler thread.
//
// Ledger (RELIABILITY.md I2): allocs_total - frees_total == num_used() at all times, and
// num_used() + num_free() == num_pages(). A page is free exactly when its refcount is 0.
//
// Misuse by the caller (releasing a free page, retaining a free page, an id out of range, a
// negative count) is a broken invariant, not bad input: it PKV_CHECK-aborts.
#pragma once

#include <cstdint>
#include <vector>

namespace pkv {

class PagePool {
 public:
  // REQUIRES: num_pages >= 0.
  explicit PagePool(int32_t num_pages);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int32_t num_pages() const { return static_cast<int32_t>(refcounts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_used() const { return num_pages() - num_free(); }

  // Allocates `n` pages (refcount 1 each) and appends their ids to `out`; all or nothing.
  // Returns false (and changes nothing) when fewer than n pages are free. REQUIRES: n >= 0.
  bool Allocate(int32_t n, std::vector<int32_t>* out);
  // Adds a holder to an allocated page.
  void Retain(int32_t page);
  // Drops a holder; the page is freed when its count reaches 0. PKV_CHECKs against underflow
  // and out-of-range ids (a broken invariant, not bad input).
  void Release(int32_t page);
  int32_t RefCount(int32_t page) const;

  uint64_t allocs_total() const { return allocs_total_; }
  uint64_t frees_total() const { return frees_total_; }

 private:
  void CheckId(int32_t page) const;

  std::vector<int32_t> refcounts_;  // [num_pages]
  // LIFO of free page ids: a just-freed page is reused first (it is likely still in L2 on the
  // GPU, and tests see reuse quickly). Initially ordered so pages are handed out 0, 1, 2, ...
  std::vector<int32_t> free_list_;  // [num_free]
  uint64_t allocs_total_ = 0;
  uint64_t frees_total_ = 0;
};

}  // namespace pkv
