// The pages of one sequence, in token order: token t lives in pages()[t / page_size]. Holds one
// reference on each page. Not thread-safe; owned by its Sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/kv_cache/page_pool.h"

namespace pkv {

class BlockTable {
 public:
  BlockTable() = default;
  BlockTable(BlockTable&&) = default;
  BlockTable& operator=(BlockTable&&) = default;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;
  // PKV_CHECKs that ReleaseAll() ran (a non-empty table at destruction is a page leak).
  ~BlockTable();

  // Pages needed to hold `num_tokens` tokens beyond those already held.
  int32_t PagesNeeded(int64_t num_tokens, int32_t page_size) const;
  // Grows the table to hold `num_tokens` tokens; all or nothing. False when the pool is short.
  bool EnsureCapacity(int64_t num_tokens, int32_t page_size, PagePool* pool);
  // Releases every page back to the pool and empties the table.
  void ReleaseAll(PagePool* pool);

  const std::vector<int32_t>& pages() const { return pages_; }
  int32_t num_pages() const { return static_cast<int32_t>(pages_.size()); }

 private:
  std::vector<int32_t> pages_;
};

}  // namespace pkv
