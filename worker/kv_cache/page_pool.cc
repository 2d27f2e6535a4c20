#include "worker/kv_cache/page_pool.h"

#include "common/status_macros.h"

namespace pkv {

PagePool::PagePool(int32_t num_pages) {
  PKV_CHECK_MSG(num_pages >= 0, "PagePool needs a non-negative page count");
  refcounts_.assign(num_pages, 0);
  free_list_.reserve(num_pages);
  // Highest id at the bottom, so the first pops hand out 0, 1, 2, ...
  for (int32_t page = num_pages - 1; page >= 0; --page) free_list_.push_back(page);
}

void PagePool::CheckId(int32_t page) const {
  PKV_CHECK_MSG(page >= 0 && page < num_pages(), "page id out of range");
}

bool PagePool::Allocate(int32_t n, std::vector<int32_t>* out) {
  PKV_CHECK_MSG(n >= 0, "negative page count");
  if (n > num_free()) return false;
  out->reserve(out->size() + n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t page = free_list_.back();
    free_list_.pop_back();
    PKV_CHECK_MSG(refcounts_[page] == 0, "free list holds a page in use");
    refcounts_[page] = 1;
    out->push_back(page);
  }
  allocs_total_ += static_cast<uint64_t>(n);
  return true;
}

void PagePool::Retain(int32_t page) {
  CheckId(page);
  PKV_CHECK_MSG(refcounts_[page] > 0, "Retain of a free page");
  ++refcounts_[page];
}

void PagePool::Release(int32_t page) {
  CheckId(page);
  PKV_CHECK_MSG(refcounts_[page] > 0, "refcount underflow: Release of a free page");
  if (--refcounts_[page] == 0) {
    free_list_.push_back(page);
    ++frees_total_;
  }
}

int32_t PagePool::RefCount(int32_t page) const {
  CheckId(page);
  return refcounts_[page];
}

}  // namespace pkv
