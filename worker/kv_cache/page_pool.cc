#include "worker/kv_cache/page_pool.h"

#include "common/status_macros.h"

namespace pkv {

PagePool::PagePool(int32_t num_pages) {
  PKV_CHECK_MSG(num_pages >= 0, "PagePool needs a non-negative page count");
  refcounts_.assign(num_pages, 0);
  lru_pos_.resize(num_pages);
  hash_of_.resize(num_pages);
  cached_.assign(num_pages, false);
  free_list_.reserve(num_pages);
  // Highest id at the bottom, so the first pops hand out 0, 1, 2, ...
  for (int32_t page = num_pages - 1; page >= 0; --page) free_list_.push_back(page);
}

void PagePool::CheckId(int32_t page) const {
  PKV_CHECK_MSG(page >= 0 && page < num_pages(), "page id out of range");
}

int32_t PagePool::TakeFreePage() {
  if (!free_list_.empty()) {
    const int32_t page = free_list_.back();
    free_list_.pop_back();
    return page;
  }
  // Evict the least recently released cached page: drop its hash, reuse its memory.
  const int32_t page = lru_.front();
  lru_.pop_front();
  PKV_CHECK_MSG(cached_[page], "evictable page without a hash");
  by_hash_.erase(hash_of_[page]);
  cached_[page] = false;
  ++evictions_total_;
  return page;
}

bool PagePool::Allocate(int32_t n, std::vector<int32_t>* out) {
  PKV_CHECK_MSG(n >= 0, "negative page count");
  if (n > num_free()) return false;
  out->reserve(out->size() + n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t page = TakeFreePage();
    PKV_CHECK_MSG(refcounts_[page] == 0, "free list holds a page in use");
    refcounts_[page] = 1;
    out->push_back(page);
  }
  allocs_total_ += static_cast<uint64_t>(n);
  return true;
}

void PagePool::Retain(int32_t page) {
  CheckId(page);
  if (refcounts_[page] == 0) {
    PKV_CHECK_MSG(cached_[page], "Retain of a free page");
    lru_.erase(lru_pos_[page]);  // a hit revives an evictable page
    ++allocs_total_;
  }
  ++refcounts_[page];
}

void PagePool::Release(int32_t page) {
  CheckId(page);
  PKV_CHECK_MSG(refcounts_[page] > 0, "refcount underflow: Release of a free page");
  if (--refcounts_[page] > 0) return;
  ++frees_total_;
  if (cached_[page]) {
    lru_pos_[page] = lru_.insert(lru_.end(), page);
  } else {
    free_list_.push_back(page);
  }
}

int32_t PagePool::RefCount(int32_t page) const {
  CheckId(page);
  return refcounts_[page];
}

int32_t PagePool::Lookup(const PageHash& hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? -1 : it->second;
}

bool PagePool::Publish(int32_t page, const PageHash& hash) {
  CheckId(page);
  PKV_CHECK_MSG(refcounts_[page] > 0, "Publish of a page nobody holds");
  if (cached_[page]) return false;
  if (!by_hash_.emplace(hash, page).second) return false;
  hash_of_[page] = hash;
  cached_[page] = true;
  return true;
}

bool PagePool::IsCached(int32_t page) const {
  CheckId(page);
  return cached_[page];
}

}  // namespace pkv
