// The host planner of the decode-attention engine (DESIGN.md, "Decode engine contract").
//
// Each decode step the worker turns its batch (real lengths N*_i and the CSR block table) into a
// DecodePlan: the work items the CUDA routes run (one CTA per item, serving all G = H_q/H_kv query
// heads of one KV head over a token range of one row), the launches, the merge map, the partial-
// state slots and the counters the metrics report. Planning is plain C++ with no CUDA include and
// no device query: the device limits are an input, so plans are unit-tested on the CPU and can be
// rebuilt each step for CUDA-graph replay (see workspace.h for the fixed-capacity device image).
//
// Invariants of every plan (checked by tests/unit/kernels/plan_test.cc):
//  - for each (row, kv head) the items' token ranges tile [0, N*_row) exactly once, in order;
//  - every token_begin is a multiple of page_size; token_end is a page boundary or N*_row;
//  - a (row, kv head) with one item writes its output directly (no partial, no merge); one with
//    S > 1 items owns partial slots [first_partial, first_partial + S), one per item;
//  - empty items (token_begin == token_end) only exist in `split` and `bucketed-exact` (neutral
//    states of the rectangular grid) or for rows of length 0 (their output is zero, LSE -inf).
// Thread-safety: PlanDecode is a pure function of its inputs; a DecodePlan is a plain value.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/attention/kv_layout.h"

namespace pkv::decode {

// Route names are metric labels (pkv_decode_steps_total{route}).
enum class Route : int32_t {
  kFused = 0,          // one item per (row, kv head), whole row, one launch
  kSplit = 1,          // rectangular (row, kv head, split) grid, S from the max-length bucket
  kWorkqueue = 2,      // 1D grid of only the non-empty items, per-row split counts
  kBucketedExact = 3,  // ablation: one split launch (+ merge launch) per distinct row length
  kPersistent = 4,     // stream-K: a resident grid sharing the batch's pages evenly
};
inline constexpr int kNumRoutes = 5;
absl::string_view RouteName(Route route);
absl::StatusOr<Route> ParseRoute(absl::string_view name);

// Where rows with more than one split are merged.
enum class MergeMode : int32_t {
  kInKernel = 0,  // the last split of a (row, kv head) to finish merges (atomic ticket): 1 launch
  kSeparate = 1,  // a second launch merges every split pair (the paper's two-kernel scheme)
};

// What the planner knows about the GPU. Filled by QueryDeviceLimits (decode_launch.h) on a GPU
// machine, or by hand in tests and for SM-restricted runs.
struct DeviceLimits {
  int32_t num_sms = 0;      // multiprocessors the kernels may use
  int32_t ctas_per_sm = 1;  // attention CTAs resident per SM for the kernel configuration
  int32_t slots() const { return num_sms * ctas_per_sm; }
};

// The split route's fill bound: it cuts each of `pairs` (row, kv head) pairs into at most
// slots / pairs pieces, so every piece has a resident slot; 1 (no cut, the fused route's plan)
// when the slots cannot hold two pieces of every pair. REQUIRES pairs > 0. The route policy
// reads the same bound (policy/features.h, SplitRouteCuts).
inline int64_t SplitFillBound(int64_t slots, int64_t pairs) {
  return slots / pairs > 1 ? slots / pairs : 1;
}

struct PlanOptions {
  Route route = Route::kWorkqueue;
  MergeMode merge = MergeMode::kInKernel;
  // Smallest split worth its fixed cost (pipeline fill, partial write, merge), in tokens; rounded
  // up to whole pages. 128 tokens of one KV head at D=128 fp16 is 64 KB of K+V.
  int32_t min_split_tokens = 128;
  // The same floor in K+V elements of the split's KV head (tokens * head_dim * 2; 0: none); the
  // larger of the two applies. Elements, not bytes: an FP8 element costs its conversion, and a
  // byte floor (twice the tokens in FP8 pages) made FP8 steps 0.2-1.5% slower where it was tried
  // (results/2026-12-03-h200-minsplit). The worker sets it for small steps, where a split's fixed
  // cost sets the time, so splits at head dim 64 would otherwise be half the work of those at 128.
  int64_t min_split_kv_elems = 0;
  // Upper bound on splits of one (row, kv head); the merge keeps one weight per split in shared
  // memory, so this must not exceed kMaxSplitsPerPair.
  int32_t max_splits = 128;
  // Fixed capacity for CUDA-graph replay: when > 0 the launch grids are sized for this many rows
  // (see CapacityFor) and padding CTAs exit early, so one captured graph serves every plan with
  // num_rows <= capacity_rows. 0: grids fit this plan exactly.
  int32_t capacity_rows = 0;
  // When > 0, no launch has more CTAs than this; the kernels stride over the remaining items.
  // Emulates a GPU with fewer SMs (limits.num_sms) when green contexts are unavailable: at most
  // num_sms * ctas_per_sm CTAs are ever resident.
  int32_t max_grid_ctas = 0;
  // Workqueue only: when > 0, split rows into chunks of this many tokens (rounded up to pages)
  // instead of choosing the chunk by the wave model. Used to compare counters with the split
  // route at its own chunk size (the paper's merge-traffic comparison).
  int32_t workqueue_chunk_tokens = 0;
  // Workqueue only: lay the items out for the kernel's stride loop (item i runs on CTA i % grid):
  // largest first, dealt to the CTAs in snake order, with the chunk chosen by the busiest CTA's
  // load under that layout (plan_routes.cc, PlanWorkqueue). false: rows in LPT order, chunk by
  // the wave model (the comparison's baseline: graph-sized workqueue steps 3-6% slower in
  // geometric mean, up to 30% on ragged B = 16-128 cells; bench/NOTES.md, seventeenth session).
  bool workqueue_balanced = true;
  // Balanced workqueue, batches of more (row, kv head) pairs than slots only: also try, for each
  // k/4 waves, the chunk of total pages / (k/4 slots) pages, whose items may number up to that
  // many waves plus one per pair (the workspace's capacity), so those batches can still split
  // their long rows. policy19 (H100): 33 changed cells, geomean 0.939, worst 1.016 (zipf-B128
  // -12..-13%, zipf/bimodal-B64@66 -11..-15%). They double BalancedChunk's candidates: plan time
  // at B = 128 on 132 SMs ~80-100 us on the build machine (bench/NOTES.md, nineteenth session).
  bool workqueue_quota_chunks = true;
};
inline constexpr int32_t kMaxSplitsPerPair = 256;
inline constexpr int32_t kMaxGroupSize = 8;
// Page ids of each item's first pages carried in the plan (DecodePlan::item_pids), so a CTA gets
// its item and the page ids of its first K/V tiles in one round trip instead of two dependent
// ones. 16 pages of 16 tokens cover the first 256 tokens: the 3 prologue tiles of w4s3 (64
// tokens each) and the first 2 of w8s3 (128); later prologue tiles, and smaller pages, wait for
// the rest of the ids from the block table (decode_attention.cuh issues the covered ones first).
inline constexpr int32_t kItemPagePrefix = 16;

// One CTA's unit of work: tokens [token_begin, token_end) of one row for one KV head.
// 32 bytes; the device reads it with two 16-byte loads.
struct WorkItem {
  int32_t row = 0;
  int32_t kv_head = 0;
  int32_t token_begin = 0;    // multiple of page_size
  int32_t token_end = 0;      // page boundary or lengths[row]; == token_begin for an empty split
  int32_t page_base = 0;      // page_indptr[row]: the row's first entry in page_ids
  int32_t split_index = 0;    // 0 .. num_splits-1
  int32_t num_splits = 1;     // items of this (row, kv head); 1 = writes the output directly
  int32_t first_partial = 0;  // partial slot of split 0 of this (row, kv head) (if num_splits > 1)
};
static_assert(sizeof(WorkItem) == 32);

// One (row, kv head) whose splits a separate merge launch combines.
struct MergeEntry {
  int32_t row = 0;
  int32_t kv_head = 0;
  int32_t first_partial = 0;
  int32_t num_splits = 0;
};
static_assert(sizeof(MergeEntry) == 16);

struct LaunchSpec {
  enum class Kind : int32_t { kAttention, kMerge };
  Kind kind = Kind::kAttention;
  int32_t first = 0;  // first item (attention) or merge entry (merge) of this launch
  int32_t count = 0;  // items or merge entries this launch covers
  int32_t grid = 0;   // CTAs launched (>= count for padded graph launches; < count persistent)
  bool persistent = false;  // CTA i runs items [cta_item_indptr[i], cta_item_indptr[i+1])
};

// Reported every step (metrics, bench TSV); the policy's cost model reads the features.
struct PlanCounters {
  int32_t launches = 0;
  int32_t ctas = 0;            // CTAs launched over all launches
  int32_t items = 0;           // work items launched
  int32_t items_nonempty = 0;  // items that read at least one token
  int32_t num_partials = 0;
  int32_t num_merges = 0;         // (row, kv head) pairs with > 1 split
  int64_t merge_state_bytes = 0;  // partial (o, lse) bytes written plus read back by the merge
  int64_t kv_bytes = 0;           // K and V bytes the step must read
  double plan_us = 0.0;           // host time spent in PlanDecode
  double occupancy() const { return items > 0 ? double(items_nonempty) / items : 1.0; }
};
struct PlanFeatures {
  int32_t batch = 0;
  int64_t total_kv_bytes = 0;
  int32_t max_len = 0;
  int32_t min_len = 0;
  double mean_len = 0.0;
  double len_cv = 0.0;  // standard deviation / mean of the lengths (0 for bucketed batches)
  int32_t items_nonempty = 0;
  int32_t launches = 0;
  int32_t num_sms = 0;
};

// Working memory of PlanDecode (contents meaningless between calls).
struct PlanScratch {
  std::vector<int32_t> row_order;  // the order rows were emitted in
  std::vector<int32_t> row_pages;  // pages each row's length spans
  // Balanced workqueue (PlanOptions::workqueue_balanced): the items of one row and size.
  struct SizeGroup {
    int32_t pages = 0;  // each item's pages
    int32_t row = 0;
    int32_t splits = 0;  // the row's split count
    int32_t count = 0;   // items: the row's splits of this size times the KV heads
  };
  std::vector<SizeGroup> size_groups;  // largest first
  // A candidate layout's load changes by CTA (BalancedCost's difference array).
  std::vector<double> load_diff;
  std::vector<int32_t> first_partials;  // [row * kv heads + head]
  std::vector<WorkItem> group_items;    // one size group's items of KV head 0
};

struct DecodePlan {
  Route route = Route::kFused;
  MergeMode merge = MergeMode::kInKernel;
  KvShape shape;
  int32_t num_rows = 0;
  // Grids sized for PlanOptions::capacity_rows: kernels read their item and merge counts from
  // the workspace header and padding CTAs exit, so one captured graph replays any such plan.
  bool graph_sized = false;
  std::vector<WorkItem> items;           // all launches' items, launch by launch
  std::vector<int32_t> cta_item_indptr;  // persistent launches only: [grid + 1]
  std::vector<MergeEntry> merges;        // pairs merged by a separate launch (kSeparate)
  std::vector<LaunchSpec> launches;
  // [items.size()][kItemPagePrefix] when PlanInput::page_ids was given, else empty: item i's
  // block-table entries page_ids[page_base + token_begin / page_size + k] for k below the item's
  // page count, 0 past it.
  std::vector<int32_t> item_pids;
  PlanScratch scratch;  // the planner's working memory, kept so replanning does not allocate
  PlanCounters counters;
  PlanFeatures features;
};

// The batch as the planner sees it (host memory).
struct PlanInput {
  const int32_t* lengths = nullptr;      // [num_rows] real KV tokens of each row (>= 0)
  const int32_t* page_indptr = nullptr;  // [num_rows + 1] CSR offsets into the block table
  int32_t num_rows = 0;
  KvShape shape;
  // Optional host copy of the block table the kernels read ([page_indptr[num_rows]], the same
  // entries as the device copy): when given, the plan carries each item's first page ids
  // (DecodePlan::item_pids). nullptr: the kernels load them from the device copy.
  const int32_t* page_ids = nullptr;
};

// Builds the plan of `options.route`. Reuses `plan`'s vectors (no allocation once warmed up).
// INVALID_ARGUMENT for a bad shape (G outside 1..8, page size outside 1..128, head dim not
// 64/128/256), negative lengths, a block table with too few pages, or too many rows for the
// requested capacity.
absl::Status PlanDecode(const PlanInput& input, const DeviceLimits& limits,
                        const PlanOptions& options, DecodePlan* plan);

// Shape checks shared by the planner and the launchers.
absl::Status ValidateShape(const KvShape& shape);

}  // namespace pkv::decode
