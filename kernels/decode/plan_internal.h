// Internals of the decode planner shared by plan.cc and plan_routes.cc: the per-call context and
// the emitters every route builds its items with. Not part of the engine's API.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/status_macros.h"
#include "kernels/decode/plan.h"

namespace pkv::decode::internal {

// The shortest split in pages: the larger of options.min_split_tokens and
// options.min_split_kv_elems (K and V elements of one KV head), rounded up to whole pages.
inline int32_t SplitFloorPages(const KvShape& shape, const PlanOptions& options) {
  const int64_t page_elems = int64_t{2} * shape.page_size * shape.head_dim;  // K and V
  const int64_t by_elems = (options.min_split_kv_elems + page_elems - 1) / page_elems;
  const int64_t by_tokens = (options.min_split_tokens + shape.page_size - 1) / shape.page_size;
  return static_cast<int32_t>(std::max(by_tokens, by_elems));
}

struct PlanContext {
  const PlanInput& in;
  const DeviceLimits& limits;
  const PlanOptions& options;
  DecodePlan* plan;
  const int32_t* pages = nullptr;  // [num_rows] ceil(length / page_size), computed once
  int32_t num_partials = 0;
  // The split floor in pages (SplitFloorPages), computed once: the routes ask for it per row and
  // per candidate chunk.
  int32_t min_split_pages = 1;

  int32_t page_size() const { return in.shape.page_size; }
  int32_t heads() const { return in.shape.num_kv_heads; }
  int32_t Pages(int32_t row) const { return pages[row]; }
  int32_t MinSplitPages() const { return min_split_pages; }
  bool graph_sized() const { return options.capacity_rows > 0; }
};

// Split k of `row`'s KV head `head` cut into n splits (chunk_pages as EmitPair's), its partial
// slots from first_partial.
WorkItem SplitItem(const PlanContext& ctx, int32_t row, int32_t head, int32_t k, int32_t n,
                   int32_t chunk_pages, int32_t first_partial);

// Reserves the partial slots of a (row, kv head) cut into n splits (and, under
// MergeMode::kSeparate, its merge entry); returns the first slot, 0 when n == 1.
int32_t AllocatePartials(PlanContext& ctx, int32_t row, int32_t head, int32_t n);

// Appends one (row, kv head) cut into `n` page-aligned splits. `chunk_pages` > 0: fixed chunks
// (split k covers pages [k*chunk, (k+1)*chunk), trailing ones may be empty: the rectangular grid);
// chunk_pages == 0: n splits of near-equal page counts (they differ by at most one page).
// Allocates n partial slots, and a merge entry under MergeMode::kSeparate, when n > 1.
void EmitPair(PlanContext& ctx, int32_t row, int32_t head, int32_t n, int32_t chunk_pages);

// Appends an attention launch over items [first, end of items) and, under kSeparate, a merge
// launch over merge entries [first_merge, end of merges) when there are any.
void AddLaunches(PlanContext& ctx, int32_t first_item, int32_t first_merge);

// Split count that fills the GPU's resident slots for `pairs` (row, kv head) pairs whose longest
// row has `max_pages` pages, capped by the max-length bucket and options.max_splits.
int32_t ChooseSplitCount(const PlanContext& ctx, int64_t pairs, int32_t max_pages);

void PlanFused(PlanContext& ctx);
void PlanSplit(PlanContext& ctx);
void PlanWorkqueue(PlanContext& ctx);
void PlanBucketedExact(PlanContext& ctx);
void PlanPersistent(PlanContext& ctx);

}  // namespace pkv::decode::internal
