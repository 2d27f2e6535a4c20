#include "worker/kv_cache/block_table.h"

#include <utility>

#include "common/status_macros.h"

namespace pkv {

BlockTable::BlockTable(BlockTable&& other) noexcept : pages_(std::move(other.pages_)) {
  other.pages_.clear();  // a moved-from vector is only "valid"; make it empty for ~BlockTable
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    PKV_CHECK_MSG(pages_.empty(), "move-assigning over a BlockTable that still holds pages");
    pages_ = std::move(other.pages_);
    other.pages_.clear();
  }
  return *this;
}

BlockTable::~BlockTable() {
  PKV_CHECK_MSG(pages_.empty(), "BlockTable destroyed while holding pages (KV page leak)");
}

int32_t BlockTable::PagesNeeded(int64_t num_tokens, int32_t page_size) const {
  PKV_CHECK_MSG(page_size > 0, "page_size must be positive");
  PKV_CHECK_MSG(num_tokens >= 0, "negative token count");
  const int64_t needed = PagesForTokens(num_tokens, page_size) - num_pages();
  return needed > 0 ? static_cast<int32_t>(needed) : 0;
}

bool BlockTable::EnsureCapacity(int64_t num_tokens, int32_t page_size, PagePool* pool) {
  const int32_t needed = PagesNeeded(num_tokens, page_size);
  if (needed == 0) return true;
  return pool->Allocate(needed, &pages_);  // appends, all or nothing
}

void BlockTable::AppendShared(const std::vector<int32_t>& pages, PagePool* pool) {
  pages_.reserve(pages_.size() + pages.size());
  for (int32_t page : pages) {
    PKV_CHECK_MSG(pool->IsCached(page), "AppendShared of a page not in the prefix cache");
    pool->Retain(page);
    pages_.push_back(page);
  }
}

void BlockTable::ReleaseAll(PagePool* pool) {
  for (auto it = pages_.rbegin(); it != pages_.rend(); ++it) pool->Release(*it);
  pages_.clear();
}

}  // namespace pkv
