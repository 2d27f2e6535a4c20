// The split rules of each decode route (see plan.h for the invariants they keep).
#include <algorithm>
#include <cstdint>

#include "kernels/decode/plan_internal.h"
#include "kernels/decode/workspace.h"

namespace pkv::decode::internal {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int32_t NextPow2(int32_t x) {
  int32_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// Fixed cost of one wave of work items expressed as KV bytes one slot streams in the same time.
// Measured on the H200 (bench/NOTES.md, run 1): a bucketed B=4 N=32k step took 162 us as four
// waves of 1056 items and 144 us as one balanced wave, ~6 us per extra wave, while one slot
// streams ~17 GB/s (4.5 TB/s over 264 resident CTAs): ~100 KB. (Scaling it by the CTAs resident
// an SM, so FP8 w4s3's 4 CTAs an SM pay half, made three FP8 w4s3 held-out cells 2-8% slower:
// bench/NOTES.md, decode3.)
constexpr int64_t kItemOverheadBytes = 96 * 1024;
// Fixed cost of splitting a row (partial write, fence, ticket, the last split's read-back and
// merge), paid once on the step's critical path, as KV bytes one slot streams meanwhile.
// Measured on the H200 (bench/NOTES.md, decodefix): a row of 128-135 tokens took 10.66 us as two
// splits and 9.15 us unsplit, ~1.5 us at ~17 GB/s a slot: ~24 KB.
constexpr int64_t kMergeOverheadBytes = 24 * 1024;

int32_t CapGrid(const PlanContext& ctx, int32_t grid) {
  return ctx.options.max_grid_ctas > 0 ? std::min(grid, ctx.options.max_grid_ctas) : grid;
}

// The CTAs of a (non-persistent) attention launch of `items` items. Graph-sized grids are the
// same for every plan of the bucket: a resident grid that strides over the items (the count comes
// from the workspace header at run time); otherwise one CTA an item.
int32_t LaunchGrid(const PlanContext& ctx, int64_t items) {
  return CapGrid(ctx, static_cast<int32_t>(ctx.graph_sized() ? ctx.limits.slots() : items));
}

}  // namespace

WorkItem SplitItem(const PlanContext& ctx, int32_t row, int32_t head, int32_t k, int32_t n,
                   int32_t chunk_pages, int32_t first_partial) {
  const int32_t pages = ctx.Pages(row);
  int64_t bp, ep;
  if (chunk_pages > 0) {
    bp = std::min<int64_t>(int64_t{k} * chunk_pages, pages);
    ep = std::min<int64_t>(int64_t{k + 1} * chunk_pages, pages);
  } else {
    bp = int64_t{k} * pages / n;
    ep = int64_t{k + 1} * pages / n;
  }
  const int32_t ps = ctx.page_size();
  WorkItem it;
  it.row = row;
  it.kv_head = head;
  // Empty splits (the rectangular grid's neutral states) carry [0, 0).
  it.token_begin = ep > bp ? static_cast<int32_t>(bp * ps) : 0;
  it.token_end =
      ep > bp ? static_cast<int32_t>(std::min<int64_t>(ep * ps, ctx.in.lengths[row])) : 0;
  it.page_base = ctx.in.page_indptr[row];
  it.split_index = k;
  it.num_splits = n;
  it.first_partial = first_partial;
  return it;
}

int32_t AllocatePartials(PlanContext& ctx, int32_t row, int32_t head, int32_t n) {
  if (n <= 1) return 0;
  const int32_t first_partial = ctx.num_partials;
  ctx.num_partials += n;
  if (ctx.plan->merge == MergeMode::kSeparate) {
    ctx.plan->merges.push_back(MergeEntry{row, head, first_partial, n});
  }
  return first_partial;
}

void EmitPair(PlanContext& ctx, int32_t row, int32_t head, int32_t n, int32_t chunk_pages) {
  const int32_t first_partial = AllocatePartials(ctx, row, head, n);
  for (int32_t k = 0; k < n; ++k) {
    ctx.plan->items.push_back(SplitItem(ctx, row, head, k, n, chunk_pages, first_partial));
  }
}

void AddLaunches(PlanContext& ctx, int32_t first_item, int32_t first_merge) {
  DecodePlan& plan = *ctx.plan;
  LaunchSpec a;
  a.kind = LaunchSpec::Kind::kAttention;
  a.first = first_item;
  a.count = static_cast<int32_t>(plan.items.size()) - first_item;
  a.grid = LaunchGrid(ctx, a.count);
  if (a.count > 0 || ctx.graph_sized()) plan.launches.push_back(a);
  if (plan.merge != MergeMode::kSeparate) return;
  LaunchSpec m;
  m.kind = LaunchSpec::Kind::kMerge;
  m.first = first_merge;
  m.count = static_cast<int32_t>(plan.merges.size()) - first_merge;
  m.grid = CapGrid(ctx, ctx.graph_sized() ? ctx.options.capacity_rows * ctx.heads() : m.count);
  if (m.count > 0 || ctx.graph_sized()) plan.launches.push_back(m);
}

// Rule: as many splits as fit pairs * S into the resident slots once (one full wave: a second,
// partial wave would double the step time), but no split shorter than min_split_tokens of the
// row's power-of-two length bucket, at most max_splits, and none when the longest row is shorter
// than two min_split_tokens pieces. Example (H200, 132 SMs x 2 CTAs = 264 slots, H_kv = 8,
// page 16, min 128 tokens): B = 1, N = 16384 -> 1024 pages, S_fill = floor(264 / 8) = 33,
// S_len = 1024 / 8 = 128, S = 33, chunk = ceil(1024 / 33) = 32 pages -> 32 splits of 512 tokens,
// 256 items; B = 4 -> S = floor(264 / 32) = 8, 256 items; B = 1, N = 135 (9 pages): S = 1.
int32_t ChooseSplitCount(const PlanContext& ctx, int64_t pairs, int32_t max_pages) {
  if (max_pages < 2 * ctx.MinSplitPages() || pairs <= 0) return 1;  // see SplitsOf
  const int64_t s_fill = SplitFillBound(ctx.limits.slots(), pairs);
  const int64_t s_len = std::max<int64_t>(1, NextPow2(max_pages) / ctx.MinSplitPages());
  int64_t s = std::min({s_fill, s_len, int64_t{ctx.options.max_splits}, int64_t{max_pages}});
  s = std::max<int64_t>(s, 1);
  const int64_t chunk = CeilDiv(max_pages, s);
  return static_cast<int32_t>(CeilDiv(max_pages, chunk));
}

void PlanFused(PlanContext& ctx) {
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) {
    for (int32_t h = 0; h < ctx.heads(); ++h) EmitPair(ctx, r, h, 1, 0);
  }
  AddLaunches(ctx, 0, 0);
}

void PlanSplit(PlanContext& ctx) {
  int32_t max_pages = 0;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) max_pages = std::max(max_pages, ctx.Pages(r));
  const int64_t pairs = int64_t{ctx.in.num_rows} * ctx.heads();
  const int32_t s = ChooseSplitCount(ctx, pairs, max_pages);
  const int32_t chunk = s > 1 ? static_cast<int32_t>(CeilDiv(max_pages, s)) : 0;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) {
    for (int32_t h = 0; h < ctx.heads(); ++h) EmitPair(ctx, r, h, s, chunk);
  }
  AddLaunches(ctx, 0, 0);
}

namespace {

// Splits of a row of `pages` pages cut into chunks of at most `chunk` pages; a row shorter than
// two min_split_tokens pieces stays whole: cutting it gives pieces below min_split_tokens, each
// paying the merge (~1.5 us) to save a tile (decodefix: a row of 129-135 tokens was cut into
// 64 + 80, 10.66 us; whole, 9.15 us).
int32_t SplitsOf(const PlanContext& ctx, int32_t pages, int64_t chunk) {
  if (pages < 2 * ctx.MinSplitPages()) return 1;
  return static_cast<int32_t>(std::min<int64_t>(ctx.options.max_splits, CeilDiv(pages, chunk)));
}

int64_t WorkqueueItems(const PlanContext& ctx, int64_t chunk) {
  int64_t n = 0;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) n += SplitsOf(ctx, ctx.Pages(r), chunk);
  return n * ctx.heads();
}

// Estimated time of a workqueue plan with splits of at most `chunk` pages, in units of one
// pair-page: with n items on `slots` resident CTAs the hardware runs ceil(n/slots) waves of
// average items (P/n pages each), never less than the biggest item, plus each wave's fixed cost,
// plus the merge's once when any row is split.
double WorkqueueCost(const PlanContext& ctx, int64_t total_pages, int64_t chunk,
                     double item_overhead_pages, double merge_overhead_pages) {
  int64_t biggest = 0;
  bool split = false;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) {
    const int32_t pages = ctx.Pages(r);
    const int32_t n = SplitsOf(ctx, pages, chunk);
    biggest = std::max<int64_t>(biggest, CeilDiv(pages, n));
    split = split || n > 1;
  }
  const int64_t n = WorkqueueItems(ctx, chunk);
  const double waves = static_cast<double>(CeilDiv(n, ctx.limits.slots()));
  const double balanced = waves * static_cast<double>(total_pages) / static_cast<double>(n);
  return std::max(balanced, static_cast<double>(biggest)) + waves * item_overhead_pages +
         (split ? merge_overhead_pages : 0.0);
}

// Smallest split size (pages, >= lo) whose items fit in `target` slots; max_pages if none does.
int64_t SmallestChunkFitting(const PlanContext& ctx, int64_t lo, int64_t max_pages,
                             int64_t target) {
  int64_t hi = max_pages;
  if (lo >= hi || WorkqueueItems(ctx, hi) > target) return hi;
  while (lo < hi) {  // items(chunk) is non-increasing in chunk
    const int64_t mid = lo + (hi - lo) / 2;
    if (WorkqueueItems(ctx, mid) <= target) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

// Position in the item array of the i-th largest of n items when CTA c of a `grid`-CTA launch
// runs positions c, c + grid, ... (the kernel's stride loop): wave w = i / grid is dealt to the
// CTAs in order when w is even and in reverse when it is odd (a partial last wave over its own
// width), so the CTA that took one wave's largest item takes the next wave's smallest. `w` and
// `b` are i's wave and place in it; callers step them instead of dividing.
int64_t SnakePosition(int64_t w, int64_t b, int64_t n, int64_t grid) {
  const int64_t width = std::min(grid, n - w * grid);
  return w * grid + ((w & 1) != 0 ? width - 1 - b : b);
}

// The items of a workqueue plan with splits of at most `chunk` pages as groups of one row and size
// into scratch.size_groups, largest first (equal sizes in row order): a row of p pages in n splits
// has p % n items of p / n + 1 pages and the rest of p / n (EmitPair's near-equal cut), heads() of
// each. Returns the item count; *split: some row is split.
int64_t SizeGroups(PlanContext& ctx, int64_t chunk, bool* split) {
  std::vector<PlanScratch::SizeGroup>& groups = ctx.plan->scratch.size_groups;
  groups.clear();
  int64_t n = 0;
  *split = false;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) {
    const int32_t pages = ctx.Pages(r);
    const int32_t splits = SplitsOf(ctx, pages, chunk);
    const int32_t longer = pages % splits;
    if (longer > 0) groups.push_back({pages / splits + 1, r, splits, longer * ctx.heads()});
    groups.push_back({pages / splits, r, splits, (splits - longer) * ctx.heads()});
    n += int64_t{splits} * ctx.heads();
    *split = *split || splits > 1;
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.pages != b.pages ? a.pages > b.pages : a.row < b.row;
  });
  return n;
}

// The busiest CTA's load, in pair-pages plus item_overhead_pages an item, when the items of a
// workqueue plan with splits of at most `chunk` pages are laid out by EmitBalanced over `grid`
// CTAs; plus the merge's fixed cost when a row is split. A group covers whole CTA ranges of a
// wave, so the loads change only at range ends: O(s + grid) in the s = groups + waves ranges, not
// O(items). (Sorting the range ends instead, O(s log s), took half the plan time at B = 128: 180
// -> 80 us on the build machine, the same plans.)
double BalancedCost(PlanContext& ctx, int64_t chunk, int64_t grid, double item_overhead_pages,
                    double merge_overhead_pages) {
  bool split = false;
  const int64_t n = SizeGroups(ctx, chunk, &split);
  // Each group's CTA ranges as a difference array over the grid, summed once.
  std::vector<double>& diff = ctx.plan->scratch.load_diff;
  diff.assign(static_cast<size_t>(grid) + 1, 0.0);
  int64_t w = 0, b = 0;  // the next item's wave and place in it
  for (const PlanScratch::SizeGroup& g : ctx.plan->scratch.size_groups) {
    const double item = g.pages + item_overhead_pages;
    for (int64_t left = g.count; left > 0;) {
      const int64_t width = std::min(grid, n - w * grid);
      const int64_t take = std::min(left, width - b);
      const int64_t first = (w & 1) != 0 ? width - b - take : b;  // SnakePosition's CTAs
      diff[first] += item;
      diff[first + take] -= item;
      left -= take;
      b += take;
      if (b == width) b = 0, ++w;
    }
  }
  double busiest = 0.0, load = 0.0;
  for (int64_t c = 0; c < grid; ++c) busiest = std::max(busiest, load += diff[c]);
  return busiest + (split ? merge_overhead_pages : 0.0);
}

// Rule (balanced): the unsplit plan and, for k = 4..16, the smallest split size whose items fit
// in k / 4 waves of slots (never below min_split_tokens); keep the one whose busiest CTA is least
// loaded under the balanced layout (BalancedCost), ties to the larger split (fewer items).
// Quarter-wave steps matter because a step's time is its busiest CTA's: on the unseen grid's
// bimodal B = 32 line (bench/traces/unseen-20261204.tsv) at 264 slots the wave model's 528 items of
// at most 311 pages leave 120 CTAs two whole items (593 pair-pages against a mean of 401), and 456
// items of at most 418 pages lay out to 433.
int64_t BalancedChunk(PlanContext& ctx, int64_t total_pages, int64_t max_pages,
                      double item_overhead_pages, double merge_overhead_pages) {
  const int64_t grid = CapGrid(ctx, ctx.limits.slots());
  int64_t best_chunk = max_pages;
  double best_cost = BalancedCost(ctx, best_chunk, grid, item_overhead_pages, merge_overhead_pages);
  int64_t last = best_chunk;
  // Quota chunks only where the pairs outnumber the slots: the wave targets cannot split those
  // batches' long rows. Below that (wqcap, H100: bimodal-B16@66, bimodal-B32@132) the cost model
  // took them and the step was 5% slower.
  const bool quota = ctx.options.workqueue_quota_chunks &&
                     int64_t{ctx.in.num_rows} * ctx.heads() > ctx.limits.slots();
  auto consider = [&](int64_t chunk) {  // the least cost wins, ties to the larger chunk
    const double cost = BalancedCost(ctx, chunk, grid, item_overhead_pages, merge_overhead_pages);
    if (cost < best_cost || (cost == best_cost && chunk > best_chunk)) {
      best_cost = cost;
      best_chunk = chunk;
    }
  };
  for (int32_t k = 4; k <= 4 * kMaxWaves && total_pages > 0; ++k) {
    const int64_t target = int64_t{k} * ctx.limits.slots() / 4;
    const int64_t lo = std::max<int64_t>(ctx.MinSplitPages(), CeilDiv(total_pages, target));
    // Targets grow with k, so the chunk only shrinks: search below the last one.
    const int64_t chunk = SmallestChunkFitting(ctx, lo, last, target);
    if (chunk != last) {
      last = chunk;
      consider(chunk);
    }
    // The quota chunk: sum ceil(p / lo) <= P / lo + pairs items, within the workspace.
    if (quota && lo < chunk) consider(lo);
  }
  return best_chunk;
}

// Emits the items of a workqueue plan with splits of at most `chunk` pages for the launch
// AddLaunches will make (LaunchGrid): largest first (SizeGroups' order; a row's heads and splits in
// order within a group), the i-th at SnakePosition. With one CTA an item (grid >= count) that is
// the LPT order the hardware's in-order CTA dispatch packs best.
void EmitBalanced(PlanContext& ctx, int64_t chunk) {
  PlanScratch& s = ctx.plan->scratch;
  bool split = false;
  const int64_t n = SizeGroups(ctx, chunk, &split);
  const int64_t grid = LaunchGrid(ctx, n);
  const int32_t heads = ctx.heads();
  s.first_partials.resize(static_cast<size_t>(ctx.in.num_rows) * heads);
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) {
    const int32_t splits = SplitsOf(ctx, ctx.Pages(r), chunk);
    for (int32_t h = 0; h < heads; ++h) {
      s.first_partials[r * heads + h] = AllocatePartials(ctx, r, h, splits);
    }
  }
  std::vector<WorkItem>& items = ctx.plan->items;
  items.resize(static_cast<size_t>(n));
  int64_t w = 0, b = 0;
  for (const PlanScratch::SizeGroup& g : s.size_groups) {
    // The group's splits of KV head 0, then every head's copies.
    s.group_items.clear();
    for (int32_t k = 0; k < g.splits; ++k) {
      WorkItem it = SplitItem(ctx, g.row, 0, k, g.splits, 0, 0);
      const int32_t ps = ctx.page_size();
      if ((it.token_end + ps - 1) / ps - it.token_begin / ps == g.pages)
        s.group_items.push_back(it);
    }
    for (int32_t h = 0; h < heads; ++h) {
      for (WorkItem it : s.group_items) {
        it.kv_head = h;
        it.first_partial = s.first_partials[g.row * heads + h];
        items[SnakePosition(w, b, n, grid)] = it;
        if (++b == grid) b = 0, ++w;
      }
    }
  }
}

}  // namespace

// Rule: for w = 1..kMaxWaves take the smallest split size whose items fit in w * slots (never
// below min_split_tokens), also the unsplit plan, and keep the cheapest by WorkqueueCost.
// Rows are emitted longest split first (LPT order), so the hardware's in-order CTA dispatch
// packs the short tail items last. Example (264 slots, H_kv = 8, page 16, D = 128 fp16, so one
// pair-page is 8 KB, the wave overhead 12 pair-pages and the merge 3): held-out bimodal B = 8, two
// rows of 1540 and 1313 pages and six of 13..47: P = 8 * 3033 = 24264 pair-pages. w = 1: the
// smallest chunk fitting 264 items is 110 pages (14 + 12 + 6 splits a head, 256 items), cost
// max(94.8, 110) + 12 + 3 (merge) = 125; w = 2: chunk 49 pages (520 items), cost
// max(93.3, 49) + 24 + 3 = 120.3, so two waves of 520 items are planned. B = 1 of 135 tokens
// (9 pages): shorter than two pieces of 8 pages (min_split_tokens 128), so the row stays whole.
// With options.workqueue_balanced the chunk comes from BalancedChunk and EmitBalanced lays the
// items out instead.
void PlanWorkqueue(PlanContext& ctx) {
  const int32_t rows = ctx.in.num_rows;
  int64_t total_pages = 0;
  int32_t max_pages = 0, min_pages = rows > 0 ? ctx.Pages(0) : 0;
  for (int32_t r = 0; r < rows; ++r) {
    total_pages += ctx.Pages(r);
    max_pages = std::max(max_pages, ctx.Pages(r));
    min_pages = std::min(min_pages, ctx.Pages(r));
  }
  total_pages *= ctx.heads();
  const KvShape& s = ctx.in.shape;
  const double pair_page_bytes = 2.0 * s.kv_elem_bytes * s.page_size * s.head_dim;  // K+V
  const double overhead = kItemOverheadBytes / pair_page_bytes;
  const double merge_overhead = kMergeOverheadBytes / pair_page_bytes;
  const bool balanced = ctx.options.workqueue_balanced;
  int64_t best_chunk = std::max(max_pages, 1);
  const bool fixed = ctx.options.workqueue_chunk_tokens > 0;
  if (fixed) {
    best_chunk = std::max<int64_t>(1, CeilDiv(ctx.options.workqueue_chunk_tokens, ctx.page_size()));
  } else if (balanced && min_pages < max_pages) {
    // (Rows of one length cut into items of one size, to a page, where WorkqueueCost already is
    // the busiest CTA's load: the wave model's choice below stands and costs less to find.)
    best_chunk = BalancedChunk(ctx, total_pages, best_chunk, overhead, merge_overhead);
  } else {
    double best_cost = WorkqueueCost(ctx, total_pages, best_chunk, overhead, merge_overhead);
    for (int32_t w = 1; w <= kMaxWaves && total_pages > 0; ++w) {
      const int64_t target = int64_t{w} * ctx.limits.slots();
      const int64_t lo = std::max<int64_t>(ctx.MinSplitPages(), CeilDiv(total_pages, target));
      const int64_t chunk = SmallestChunkFitting(ctx, lo, best_chunk, target);
      const double cost = WorkqueueCost(ctx, total_pages, chunk, overhead, merge_overhead);
      if (cost < best_cost) {  // ties keep the fewer, larger items of the smaller wave count
        best_cost = cost;
        best_chunk = chunk;
      }
    }
  }
  if (balanced) {
    EmitBalanced(ctx, best_chunk);
    AddLaunches(ctx, 0, 0);
    return;
  }
  // LPT order: rows by descending split size (stable, so equal rows keep batch order).
  std::vector<int32_t>& order = ctx.plan->scratch.row_order;
  order.resize(rows);
  for (int32_t r = 0; r < rows; ++r) order[r] = r;
  auto split_pages = [&](int32_t r) {
    const int32_t p = ctx.Pages(r);
    return CeilDiv(p, SplitsOf(ctx, p, best_chunk));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return split_pages(a) > split_pages(b); });
  for (int32_t r : order) {
    const int32_t n = SplitsOf(ctx, ctx.Pages(r), best_chunk);
    for (int32_t h = 0; h < ctx.heads(); ++h) EmitPair(ctx, r, h, n, 0);
  }
  AddLaunches(ctx, 0, 0);
}

// The paper's ablation: rows grouped by exact length, each group split like `split` would split
// it on its own and launched on its own (attention, then merge): launches = groups * 2.
void PlanBucketedExact(PlanContext& ctx) {
  const int32_t rows = ctx.in.num_rows;
  std::vector<int32_t>& order = ctx.plan->scratch.row_order;
  order.resize(rows);
  for (int32_t r = 0; r < rows; ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return ctx.in.lengths[a] < ctx.in.lengths[b]; });
  for (int32_t g0 = 0; g0 < rows;) {
    int32_t g1 = g0;
    while (g1 < rows && ctx.in.lengths[order[g1]] == ctx.in.lengths[order[g0]]) ++g1;
    const int32_t first_item = static_cast<int32_t>(ctx.plan->items.size());
    const int32_t first_merge = static_cast<int32_t>(ctx.plan->merges.size());
    const int32_t pages = ctx.Pages(order[g0]);
    const int32_t s = ChooseSplitCount(ctx, int64_t{g1 - g0} * ctx.heads(), pages);
    for (int32_t i = g0; i < g1; ++i) {
      for (int32_t h = 0; h < ctx.heads(); ++h) EmitPair(ctx, order[i], h, s, 0);
    }
    AddLaunches(ctx, first_item, first_merge);
    g0 = g1;
  }
}

// Stream-K: a grid of at most `slots` resident CTAs; the batch's (row, kv head, page) sequence is
// cut into equal quotas of ceil(P / grid) pages, one per CTA, so every CTA streams the same bytes
// whatever the raggedness. A pair cut by a quota boundary becomes several splits (merged).
void PlanPersistent(PlanContext& ctx) {
  DecodePlan& plan = *ctx.plan;
  int64_t total_pages = 0;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) total_pages += ctx.Pages(r);
  total_pages *= ctx.heads();
  const int64_t slots = ctx.limits.slots();
  int64_t grid = ctx.graph_sized()
                     ? slots
                     : std::clamp<int64_t>(CeilDiv(total_pages, ctx.MinSplitPages()), 1, slots);
  grid = CapGrid(ctx, static_cast<int32_t>(grid));
  const int64_t quota = std::max<int64_t>(1, CeilDiv(total_pages, grid));
  std::vector<int32_t>& indptr = plan.cta_item_indptr;
  indptr.push_back(0);
  int64_t room = quota;
  for (int32_t r = 0; r < ctx.in.num_rows; ++r) {
    const int32_t pages = ctx.Pages(r);
    for (int32_t h = 0; h < ctx.heads(); ++h) {
      const size_t pair_first = plan.items.size();
      if (pages == 0) {
        EmitPair(ctx, r, h, 1, 0);  // zero output for an empty row, on the current CTA
        continue;
      }
      int32_t k = 0;
      for (int64_t off = 0; off < pages; ++k) {
        if (room == 0) {
          indptr.push_back(static_cast<int32_t>(plan.items.size()));
          room = quota;
        }
        const int64_t take = std::min<int64_t>(pages - off, room);
        WorkItem it;
        it.row = r;
        it.kv_head = h;
        it.token_begin = static_cast<int32_t>(off * ctx.page_size());
        it.token_end = static_cast<int32_t>(
            std::min<int64_t>((off + take) * ctx.page_size(), ctx.in.lengths[r]));
        it.page_base = ctx.in.page_indptr[r];
        it.split_index = k;
        plan.items.push_back(it);
        off += take;
        room -= take;
      }
      const int32_t first_partial = k > 1 ? ctx.num_partials : 0;
      if (k > 1) ctx.num_partials += k;
      for (size_t i = pair_first; i < plan.items.size(); ++i) {
        plan.items[i].num_splits = k;
        plan.items[i].first_partial = first_partial;
      }
      if (k > 1 && plan.merge == MergeMode::kSeparate) {
        plan.merges.push_back(MergeEntry{r, h, first_partial, k});
      }
    }
  }
  while (static_cast<int64_t>(indptr.size()) < grid + 1) {
    indptr.push_back(static_cast<int32_t>(plan.items.size()));
  }
  LaunchSpec a;
  a.kind = LaunchSpec::Kind::kAttention;
  a.count = static_cast<int32_t>(plan.items.size());
  a.grid = static_cast<int32_t>(grid);
  a.persistent = true;
  plan.launches.push_back(a);
  if (plan.merge == MergeMode::kSeparate) {
    LaunchSpec m;
    m.kind = LaunchSpec::Kind::kMerge;
    m.count = static_cast<int32_t>(plan.merges.size());
    m.grid = CapGrid(ctx, ctx.graph_sized() ? ctx.options.capacity_rows * ctx.heads() : m.count);
    if (m.count > 0 || ctx.graph_sized()) plan.launches.push_back(m);
  }
}

}  // namespace pkv::decode::internal
