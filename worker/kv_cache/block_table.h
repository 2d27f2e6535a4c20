// The pages of one sequence, in token order: token t lives in pages()[t / page_size], slot
// t % page_size. Holds one reference on each page. Not thread-safe; owned by its Sequence.
//
// Capacity is num_pages() * page_size tokens. A table only grows (EnsureCapacity) or empties
// (ReleaseAll); the scheduler never shrinks one in between. A moved-from table is empty, and
// moving into a non-empty table is a leak (PKV_CHECKed). The page size is not stored: every
// caller passes the worker's one page size.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/kv_cache/page_pool.h"

namespace pkv {

class BlockTable {
 public:
  BlockTable() = default;
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;
  // PKV_CHECKs that ReleaseAll() ran (a non-empty table at destruction is a page leak).
  ~BlockTable();

  // Pages needed to hold `num_tokens` tokens beyond those already held:
  // max(0, ceil(num_tokens / page_size) - num_pages()). REQUIRES: page_size > 0, num_tokens >= 0.
  int32_t PagesNeeded(int64_t num_tokens, int32_t page_size) const;
  // Grows the table to hold `num_tokens` tokens; all or nothing. False when the pool is short.
  bool EnsureCapacity(int64_t num_tokens, int32_t page_size, PagePool* pool);
  // Appends pages found in the prefix cache, taking a reference on each (PagePool::Retain).
  // REQUIRES: each page is cached (held or evictable) and the table holds only full pages.
  void AppendShared(const std::vector<int32_t>& pages, PagePool* pool);
  // Releases every page back to the pool and empties the table. Pages are released last first,
  // so a sequence's tail pages reach the LRU end of the evictable list before its head pages and
  // are evicted first (evicting a head page would strand every cached page after it).
  void ReleaseAll(PagePool* pool);

  // Tokens the held pages can store.
  int64_t Capacity(int32_t page_size) const { return int64_t{num_pages()} * page_size; }

  const std::vector<int32_t>& pages() const { return pages_; }
  int32_t num_pages() const { return static_cast<int32_t>(pages_.size()); }

 private:
  std::vector<int32_t> pages_;  // [num_pages] page ids, in token order
};

// Pages that hold `num_tokens` tokens: ceil(num_tokens / page_size). REQUIRES: page_size > 0.
inline int64_t PagesForTokens(int64_t num_tokens, int32_t page_size) {
  return (num_tokens + page_size - 1) / page_size;
}

}  // namespace pkv
