// Property tests of the decode planner (kernels/decode/plan.h): on random batches, for every
// route and merge mode, every (row, kv head, split) is covered once, the splits tile each row's
// length on page boundaries, partial slots are disjoint, launches partition the items, the
// persistent CTA indptr is monotone, and the counted workspace equals the filled one.
#include "kernels/decode/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/decode/decode_launch.h"
#include "kernels/decode/workspace.h"

namespace pkv::decode {
namespace {

struct Batch {
  std::vector<int32_t> lengths;
  std::vector<int32_t> page_indptr;
  std::vector<int32_t> page_ids;  // [page_indptr.back()] distinct random ids
  KvShape shape;
  bool with_page_ids = false;  // pass the block table (DecodePlan::item_pids)
  PlanInput input() const {
    PlanInput in;
    in.lengths = lengths.data();
    in.page_indptr = page_indptr.data();
    in.num_rows = static_cast<int32_t>(lengths.size());
    in.shape = shape;
    if (with_page_ids) in.page_ids = page_ids.data();
    return in;
  }
};

// Every item's carried page ids are its first block-table entries (0 past its pages); none
// without a block table.
void CheckItemPagePrefix(const Batch& b, const DecodePlan& plan) {
  if (!b.with_page_ids) {
    EXPECT_TRUE(plan.item_pids.empty());
    return;
  }
  ASSERT_EQ(plan.item_pids.size(), plan.items.size() * kItemPagePrefix);
  const int32_t ps = b.shape.page_size;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const WorkItem& it = plan.items[i];
    const int32_t pages = (it.token_end - it.token_begin + ps - 1) / ps;
    for (int32_t k = 0; k < kItemPagePrefix; ++k) {
      const int32_t want = k < pages ? b.page_ids[it.page_base + it.token_begin / ps + k] : 0;
      ASSERT_EQ(plan.item_pids[i * kItemPagePrefix + k], want) << "item " << i << " page " << k;
    }
  }
}

// Random batch: a mix of the trace kinds plus awkward lengths (0, 1, page +- 1), and block
// tables with spare pages at the end of some rows.
Batch RandomBatch(std::mt19937& rng, int32_t rows, const KvShape& shape) {
  Batch b;
  b.shape = shape;
  const int ps = shape.page_size;
  const int kind = std::uniform_int_distribution<int>(0, 4)(rng);
  const int common = std::uniform_int_distribution<int>(1, 40000)(rng);
  b.page_indptr.push_back(0);
  for (int32_t r = 0; r < rows; ++r) {
    int32_t len = 0;
    switch (kind) {
      case 0:
        len = common;
        break;  // bucketed
      case 1:
        len = std::uniform_int_distribution<int>(0, 33000)(rng);
        break;
      case 2:
        len = (rng() % 4 == 0) ? std::uniform_int_distribution<int>(16384, 32768)(rng)
                               : std::uniform_int_distribution<int>(128, 1024)(rng);
        break;
      case 3: {
        const int awkward[] = {0, 1, ps - 1, ps, ps + 1, 2 * ps, 3 * ps - 1};
        len = std::max(0, awkward[rng() % 7]);
        break;
      }
      default:
        len = 128 * std::uniform_int_distribution<int>(1, 256)(rng);
        break;
    }
    b.lengths.push_back(len);
    const int32_t pages = (len + ps - 1) / ps + static_cast<int32_t>(rng() % 3);
    b.page_indptr.push_back(b.page_indptr.back() + pages);
  }
  b.page_ids.resize(b.page_indptr.back());
  for (size_t i = 0; i < b.page_ids.size(); ++i) b.page_ids[i] = static_cast<int32_t>(7 * i + 3);
  std::shuffle(b.page_ids.begin(), b.page_ids.end(), rng);
  b.with_page_ids = rng() % 2 == 0;
  return b;
}

// Checks every invariant of plan.h on `plan` (gtest assertions).
void CheckPlan(const Batch& b, const DeviceLimits& limits, const PlanOptions& opt,
               const DecodePlan& plan) {
  const KvShape& s = b.shape;
  const int32_t rows = static_cast<int32_t>(b.lengths.size());
  const int32_t ps = s.page_size;
  // (row, head) -> split index -> item
  std::map<std::pair<int, int>, std::map<int, WorkItem>> pairs;
  for (const WorkItem& it : plan.items) {
    ASSERT_GE(it.row, 0);
    ASSERT_LT(it.row, rows);
    ASSERT_GE(it.kv_head, 0);
    ASSERT_LT(it.kv_head, s.num_kv_heads);
    ASSERT_EQ(it.page_base, b.page_indptr[it.row]);
    ASSERT_EQ(it.token_begin % ps, 0) << "unaligned split begin";
    ASSERT_LE(it.token_begin, it.token_end);
    ASSERT_LE(it.token_end, b.lengths[it.row]);
    if (it.token_end > it.token_begin && it.token_end != b.lengths[it.row]) {
      ASSERT_EQ(it.token_end % ps, 0) << "split end is neither a page boundary nor the length";
    }
    auto& splits = pairs[{it.row, it.kv_head}];
    ASSERT_TRUE(splits.emplace(it.split_index, it).second) << "(row, head, split) covered twice";
  }
  ASSERT_EQ(static_cast<int64_t>(pairs.size()), int64_t{rows} * s.num_kv_heads)
      << "a (row, kv head) has no item";
  std::vector<std::pair<int, int>> slot_ranges;
  int expected_merges = 0;
  for (const auto& [key, splits] : pairs) {
    const int n = static_cast<int>(splits.size());
    int32_t next = 0;
    for (int k = 0; k < n; ++k) {
      ASSERT_TRUE(splits.count(k)) << "split indices are not 0..n-1";
      const WorkItem& it = splits.at(k);
      ASSERT_EQ(it.num_splits, n);
      ASSERT_EQ(it.first_partial, splits.at(0).first_partial);
      if (it.token_end == it.token_begin) continue;
      ASSERT_EQ(it.token_begin, next) << "splits of a row must tile its length in order";
      next = it.token_end;
    }
    ASSERT_EQ(next, b.lengths[key.first]) << "splits do not cover the row";
    if (n > 1) {
      slot_ranges.push_back({splits.at(0).first_partial, n});
      ++expected_merges;
    }
    if (opt.route == Route::kWorkqueue || opt.route == Route::kPersistent) {
      for (const auto& [k, it] : splits) {
        if (b.lengths[key.first] > 0) {
          ASSERT_GT(it.token_end, it.token_begin) << "empty item";
        }
      }
    }
    if (opt.route == Route::kFused) {
      ASSERT_EQ(n, 1);
    }
  }
  std::sort(slot_ranges.begin(), slot_ranges.end());
  for (size_t i = 0; i < slot_ranges.size(); ++i) {
    const int end = slot_ranges[i].first + slot_ranges[i].second;
    ASSERT_LE(end, plan.counters.num_partials);
    if (i + 1 < slot_ranges.size()) {
      ASSERT_LE(end, slot_ranges[i + 1].first) << "slots overlap";
    }
  }
  ASSERT_EQ(plan.counters.num_merges, expected_merges);
  if (plan.merge == MergeMode::kSeparate) {
    ASSERT_EQ(static_cast<int>(plan.merges.size()), expected_merges);
  } else {
    ASSERT_TRUE(plan.merges.empty());
  }
  // Attention launches partition the items; persistent indptr is monotone and complete.
  int32_t covered = 0;
  for (const LaunchSpec& l : plan.launches) {
    if (l.kind != LaunchSpec::Kind::kAttention) continue;
    ASSERT_EQ(l.first, covered);
    covered += l.count;
    if (l.persistent) {
      const auto& ip = plan.cta_item_indptr;
      ASSERT_EQ(static_cast<int>(ip.size()), l.grid + 1);
      ASSERT_EQ(ip.front(), 0);
      ASSERT_EQ(ip.back(), static_cast<int32_t>(plan.items.size()));
      ASSERT_TRUE(std::is_sorted(ip.begin(), ip.end())) << "cta indptr not monotone";
      ASSERT_LE(l.grid, limits.slots());
    } else if (!plan.graph_sized && opt.max_grid_ctas == 0) {
      ASSERT_EQ(l.grid, l.count);
    }
    if (opt.max_grid_ctas > 0) {
      ASSERT_LE(l.grid, opt.max_grid_ctas);
    }
  }
  ASSERT_EQ(covered, static_cast<int32_t>(plan.items.size()));
  // Counters computed independently.
  int nonempty = 0;
  int64_t merge_bytes = 0;
  const int64_t g = s.group_size();
  for (const WorkItem& it : plan.items) {
    const bool ne = it.token_end > it.token_begin;
    nonempty += ne;
    if (it.num_splits > 1) merge_bytes += 2 * (g * 4 + (ne ? g * s.head_dim * 4 : 0));
  }
  ASSERT_EQ(plan.counters.items_nonempty, nonempty);
  ASSERT_EQ(plan.counters.items, static_cast<int>(plan.items.size()));
  ASSERT_EQ(plan.counters.merge_state_bytes, merge_bytes);
  ASSERT_EQ(plan.counters.launches, static_cast<int>(plan.launches.size()));
  int64_t kv = 0;
  for (int32_t len : b.lengths) kv += int64_t{len} * s.num_kv_heads * s.head_dim * 4;
  ASSERT_EQ(plan.counters.kv_bytes, kv);
}

// Counted layout == filled layout, and the image holds the plan at the counted offsets.
void CheckWorkspace(const DecodePlan& plan, const PlanSizes& sizes) {
  const WorkspaceLayout counted = LayoutWorkspace(sizes, plan.shape, nullptr, nullptr);
  std::vector<uint8_t> image(counted.partial_lse + 64, 0xAB);
  const WorkspaceLayout filled = LayoutWorkspace(sizes, plan.shape, &plan, image.data());
  ASSERT_EQ(counted.header, filled.header);
  ASSERT_EQ(counted.cta_indptr, filled.cta_indptr);
  ASSERT_EQ(counted.merges, filled.merges);
  ASSERT_EQ(counted.items, filled.items);
  ASSERT_EQ(counted.item_pids, filled.item_pids);
  ASSERT_EQ(counted.partial_lse, filled.partial_lse);
  ASSERT_EQ(counted.partial_o, filled.partial_o);
  ASSERT_EQ(counted.counters, filled.counters);
  ASSERT_EQ(counted.total_bytes, filled.total_bytes);
  ASSERT_LE(filled.upload_bytes, counted.upload_bytes);
  ASSERT_EQ(filled.upload_bytes,
            filled.items + static_cast<int64_t>(plan.items.size() * sizeof(WorkItem)));
  int32_t header[4];
  std::memcpy(header, image.data() + filled.header, sizeof(header));
  EXPECT_EQ(header[0], static_cast<int32_t>(plan.items.size()));
  EXPECT_EQ(header[3], plan.num_rows);
  if (!plan.items.empty()) {
    EXPECT_EQ(std::memcmp(image.data() + filled.items, plan.items.data(),
                          plan.items.size() * sizeof(WorkItem)),
              0);
  }
  ASSERT_EQ(filled.upload_pid_bytes, static_cast<int64_t>(plan.item_pids.size() * 4));
  ASSERT_LE(filled.item_pids + filled.upload_pid_bytes, counted.partial_lse);
  if (!plan.item_pids.empty()) {
    EXPECT_EQ(std::memcmp(image.data() + filled.item_pids, plan.item_pids.data(),
                          plan.item_pids.size() * 4),
              0);
  }
  if (!plan.cta_item_indptr.empty()) {
    EXPECT_EQ(std::memcmp(image.data() + filled.cta_indptr, plan.cta_item_indptr.data(),
                          plan.cta_item_indptr.size() * 4),
              0);
  }
  for (int64_t off : {counted.cta_indptr, counted.merges, counted.items, counted.item_pids,
                      counted.partial_lse, counted.partial_o, counted.counters}) {
    EXPECT_EQ(off % kWorkspaceAlign, 0);
  }
}

TEST(DecodePlanTest, RandomBatchesKeepEveryInvariant) {
  std::mt19937 rng(20260701);
  const int kPageSizes[] = {1, 7, 16, 64, 128};
  const int kRows[] = {0, 1, 2, 3, 4, 8, 16, 33, 64, 128, 256};
  for (int trial = 0; trial < 400; ++trial) {
    KvShape shape;
    shape.num_kv_heads = std::uniform_int_distribution<int>(1, 8)(rng);
    shape.num_q_heads = shape.num_kv_heads * std::uniform_int_distribution<int>(1, 8)(rng);
    shape.head_dim = 64 << (rng() % 3);
    shape.page_size = kPageSizes[rng() % 5];
    const int32_t rows = kRows[rng() % 11];
    const Batch b = RandomBatch(rng, rows, shape);
    DeviceLimits limits{std::uniform_int_distribution<int>(1, 132)(rng),
                        std::uniform_int_distribution<int>(1, 3)(rng)};
    for (int r = 0; r < kNumRoutes; ++r) {
      for (MergeMode merge : {MergeMode::kInKernel, MergeMode::kSeparate}) {
        PlanOptions opt;
        opt.route = static_cast<Route>(r);
        opt.merge = merge;
        opt.min_split_tokens = 1 + rng() % 512;
        const bool graph = opt.route != Route::kBucketedExact && rng() % 2 == 0;
        opt.capacity_rows = graph ? std::max(rows, 1) + static_cast<int>(rng() % 5) : 0;
        opt.max_grid_ctas = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 64) : 0;
        opt.workqueue_balanced = trial % 2 == 1;
        opt.workqueue_quota_chunks = trial % 4 != 1;
        DecodePlan plan;
        ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &plan).ok());
        SCOPED_TRACE(testing::Message() << "trial " << trial << " route " << RouteName(opt.route)
                                        << " rows " << rows << " ps " << shape.page_size);
        CheckPlan(b, limits, opt, plan);
        CheckItemPagePrefix(b, plan);
        if (HasFatalFailure()) return;
        CheckWorkspace(plan, SizesOf(plan));
        const PlanSizes cap = CapacityFor(std::max(rows, opt.capacity_rows), shape, limits, opt);
        ASSERT_TRUE(CheckFits(plan, cap).ok()) << CheckFits(plan, cap).message();
        CheckWorkspace(plan, cap);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(DecodePlanTest, RouteShapesMatchTheirRules) {
  KvShape shape{32, 8, 128, 16};
  const DeviceLimits limits{132, 2};
  Batch b;
  b.shape = shape;
  b.lengths = {16384};
  b.page_indptr = {0, 1024};
  DecodePlan plan;
  PlanOptions opt;
  opt.route = Route::kSplit;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &plan).ok());
  // B*H_kv*S fills the 264 slots with at most one wave and every split is page-aligned.
  EXPECT_EQ(plan.items.size() % 8, 0u);
  EXPECT_GT(plan.items.size(), 132u);
  EXPECT_LE(plan.items.size(), 264u);
  EXPECT_EQ(plan.counters.launches, 1);
  // Bimodal B=8: bucketed-exact launches a split kernel per distinct length (and a merge for
  // every length long enough to split); workqueue one kernel and no empty items.
  b.lengths = {20000, 300, 700, 31000, 500, 900, 128, 1000};
  b.page_indptr = {0};
  for (int32_t len : b.lengths) b.page_indptr.push_back(b.page_indptr.back() + (len + 15) / 16);
  DecodePlan wq, sp, be;
  opt.route = Route::kWorkqueue;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &wq).ok());
  opt.route = Route::kSplit;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &sp).ok());
  opt.route = Route::kBucketedExact;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &be).ok());
  EXPECT_EQ(wq.counters.launches, 1);
  EXPECT_GE(be.counters.launches, 8 + 7);  // only the 128-token row is too short to split
  EXPECT_LT(sp.counters.occupancy(), 1.0);
  EXPECT_EQ(wq.counters.occupancy(), 1.0);
  opt.route = Route::kWorkqueue;
  opt.merge = MergeMode::kSeparate;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &wq).ok());
  EXPECT_EQ(wq.counters.launches, 2);
}

// The busiest CTA's pages (plus `overhead` an item) when CTA c runs items c, c + grid, ... of a
// one-launch plan (the graph-sized stride loop).
double BusiestCta(const DecodePlan& plan, int32_t page_size, double overhead) {
  const int32_t grid = plan.launches.front().grid;
  std::vector<double> load(grid, 0.0);
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const WorkItem& it = plan.items[i];
    load[i % grid] += (it.token_end + page_size - 1) / page_size - it.token_begin / page_size;
    load[i % grid] += overhead;
  }
  return *std::max_element(load.begin(), load.end());
}

// The balanced workqueue layout (largest items first, dealt in snake order) on the unseen grid's
// bimodal B = 32 line (bench/traces/unseen-20261204.tsv) at 264 slots: the wave model's plan
// leaves some CTAs two whole items of the long rows; the balanced one keeps the busiest CTA within
// 10% of the mean and well under the wave model's.
// 32 rows of a bimodal batch, the 8B's attention shape (256 (row, kv head) pairs).
Batch RaggedBatch32() {
  Batch b;
  b.shape = KvShape{32, 8, 128, 16};
  b.lengths = {17803, 332,   907,   375, 508,   610, 681, 542,   486, 944,  169,
               19144, 29250, 18623, 906, 29789, 542, 675, 27922, 186, 1001, 509,
               26743, 27363, 731,   838, 152,   712, 405, 957,   987, 922};
  b.page_indptr = {0};
  for (int32_t len : b.lengths) b.page_indptr.push_back(b.page_indptr.back() + (len + 15) / 16);
  return b;
}

TEST(DecodePlanTest, BalancedWorkqueueEvensTheCtasOfARaggedBatch) {
  const DeviceLimits limits{132, 2};
  const Batch b = RaggedBatch32();
  const int64_t pages = b.page_indptr.back();
  PlanOptions opt;
  opt.route = Route::kWorkqueue;
  opt.capacity_rows = 32;
  opt.workqueue_balanced = false;
  DecodePlan waves, balanced;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &waves).ok());
  opt.workqueue_balanced = true;
  ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &balanced).ok());
  CheckPlan(b, limits, opt, balanced);
  ASSERT_EQ(balanced.launches.front().grid, 264);
  const double overhead = 12.0;  // kItemOverheadBytes over one pair-page (8 KB)
  const double mean = (8.0 * pages + overhead * balanced.items.size()) / 264;
  const double busiest_waves = BusiestCta(waves, 16, overhead);
  const double busiest = BusiestCta(balanced, 16, overhead);
  EXPECT_LT(busiest, 1.1 * mean) << "mean " << mean;
  EXPECT_LT(busiest, 0.8 * busiest_waves);
  // Largest first: the first wave's items are at least as long as any later one.
  int32_t first_wave_min = INT32_MAX, later_max = 0;
  for (size_t i = 0; i < balanced.items.size(); ++i) {
    const int32_t n = balanced.items[i].token_end - balanced.items[i].token_begin;
    if (i < 264)
      first_wave_min = std::min(first_wave_min, n);
    else
      later_max = std::max(later_max, n);
  }
  EXPECT_GE(first_wave_min + 16, later_max);
}

// Quota chunks are tried only for batches of more (row, kv head) pairs than slots: with 264 slots
// the 256 pairs plan as without them; with 132 slots the plan may change and stays whole.
TEST(DecodePlanTest, QuotaChunksOnlyWhenPairsOutnumberSlots) {
  const Batch b = RaggedBatch32();
  for (const DeviceLimits limits : {DeviceLimits{132, 2}, DeviceLimits{66, 2}}) {
    PlanOptions opt;
    opt.route = Route::kWorkqueue;
    opt.capacity_rows = 32;
    opt.workqueue_quota_chunks = false;
    DecodePlan plain, quota;
    ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &plain).ok());
    opt.workqueue_quota_chunks = true;
    ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &quota).ok());
    CheckPlan(b, limits, opt, quota);
    if (limits.slots() >= 256) {
      ASSERT_EQ(quota.items.size(), plain.items.size());
      for (size_t i = 0; i < quota.items.size(); ++i) {
        EXPECT_EQ(std::memcmp(&quota.items[i], &plain.items[i], sizeof(WorkItem)), 0) << i;
      }
    }
  }
}

// A row shorter than two min_split_tokens pieces stays whole (each split pays the merge): 135
// tokens (9 pages of 16, min 128 tokens) and 240 (15) on the workqueue and split routes; 241 (16
// pages) splits.
TEST(DecodePlanTest, RowsShorterThanTwoMinSplitsStayWhole) {
  const DeviceLimits limits{132, 2};
  for (Route route : {Route::kWorkqueue, Route::kSplit}) {
    for (int32_t len : {135, 240, 241, 300}) {
      Batch b;
      b.shape = KvShape{32, 8, 128, 16};
      b.lengths = {len};
      b.page_indptr = {0, (len + 15) / 16};
      PlanOptions opt;
      opt.route = route;
      DecodePlan plan;
      ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &plan).ok());
      if (len <= 240) {  // at most 15 pages
        EXPECT_EQ(plan.items.size(), 8u) << RouteName(route) << " " << len;
      } else {
        EXPECT_GT(plan.items.size(), 8u) << RouteName(route) << " " << len;
      }
    }
  }
}

// min_split_kv_elems floors a split by its K+V elements: 32768 is 128 tokens at head dim 128 (no
// change from the token floor), in FP8 pages too, and 256 tokens at head dim 64. One 4096-token
// row, 8 KV heads, 132 x 4 slots: the split route takes 4096 / floor splits a head.
TEST(DecodePlanTest, MinSplitKvElemsFloorsTheSplitByItsElements) {
  const DeviceLimits limits{132, 4};
  struct Cell {
    int32_t head_dim, kv_elem_bytes;
    int64_t min_split_kv_elems;
    size_t splits;
  };
  for (const Cell& c :
       {Cell{128, 2, 0, 32}, Cell{128, 2, 32768, 32}, Cell{64, 2, 0, 32}, Cell{64, 2, 32768, 16},
        Cell{128, 1, 32768, 32}, Cell{64, 1, 32768, 16}, Cell{64, 2, 1 << 19, 1}}) {
    Batch b;
    b.shape = KvShape{32, 8, c.head_dim, 16, c.kv_elem_bytes};
    b.lengths = {4096};
    b.page_indptr = {0, 256};
    PlanOptions opt;
    opt.route = Route::kSplit;
    opt.min_split_kv_elems = c.min_split_kv_elems;
    DecodePlan plan;
    ASSERT_TRUE(PlanDecode(b.input(), limits, opt, &plan).ok());
    EXPECT_EQ(plan.items.size(), 8 * c.splits)
        << "D " << c.head_dim << " elem " << c.kv_elem_bytes << " floor " << c.min_split_kv_elems;
  }
}

TEST(DecodePlanTest, RejectsBadInput) {
  Batch b;
  b.shape = KvShape{32, 8, 128, 16};
  b.lengths = {40};
  b.page_indptr = {0, 2};  // 32 tokens of pages for 40 tokens
  DecodePlan plan;
  const DeviceLimits limits{132, 2};
  EXPECT_EQ(PlanDecode(b.input(), limits, {}, &plan).code(), absl::StatusCode::kInvalidArgument);
  b.page_indptr = {0, 3};
  EXPECT_TRUE(PlanDecode(b.input(), limits, {}, &plan).ok());
  b.lengths = {-1};
  EXPECT_EQ(PlanDecode(b.input(), limits, {}, &plan).code(), absl::StatusCode::kInvalidArgument);
  b.lengths = {40};
  for (KvShape bad : {KvShape{72, 8, 128, 16}, KvShape{30, 8, 128, 16}, KvShape{32, 8, 96, 16},
                      KvShape{32, 8, 128, 0}, KvShape{32, 8, 128, 129}}) {
    b.shape = bad;
    const absl::Status st = PlanDecode(b.input(), limits, {}, &plan);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("supported"), absl::string_view::npos) << st.message();
  }
  b.shape = KvShape{32, 8, 128, 16};
  EXPECT_FALSE(PlanDecode(b.input(), DeviceLimits{0, 1}, {}, &plan).ok());
  PlanOptions graph;
  graph.route = Route::kBucketedExact;
  graph.capacity_rows = 4;
  EXPECT_FALSE(PlanDecode(b.input(), limits, graph, &plan).ok());
  EXPECT_FALSE(ParseRoute("fused-ish").ok());
  for (int r = 0; r < kNumRoutes; ++r) {
    EXPECT_EQ(*ParseRoute(RouteName(static_cast<Route>(r))), static_cast<Route>(r));
  }
}

// The per-step configuration rule (decode_launch.h): FP8 many-row skewed batches take w4s3;
// 16-bit one- and two-row steps take w8s3 where its ring fits (head dim <= 128).
TEST(ChooseKernelConfigTest, Fp8ManyRowSkewedBatchesTakeFourWarps) {
  auto warps = [](KvCacheDtype kv, int32_t batch, double cv) {
    return ChooseKernelConfig(kv, 128, batch, cv).warps;
  };
  EXPECT_EQ(warps(KvCacheDtype::kFp8E4M3, 32, 1.63), 4);
  EXPECT_EQ(warps(KvCacheDtype::kFp8E5M2, 16, 0.4), 4);
  EXPECT_EQ(warps(KvCacheDtype::kFp8E4M3, 8, 1.6), 8);    // few rows
  EXPECT_EQ(warps(KvCacheDtype::kFp8E4M3, 128, 0.0), 8);  // equal lengths
  EXPECT_EQ(warps(KvCacheDtype::kFp8E4M3, 1, 0.0), 8);
  KernelConfig c[2];
  ASSERT_EQ(CandidateKernelConfigs(KvCacheDtype::kFp8E4M3, 128, c), 2);
  EXPECT_EQ(c[0].warps, DefaultKernelConfig(KvCacheDtype::kFp8E4M3).warps);
  EXPECT_EQ(c[1].warps, 4);
}

TEST(ChooseKernelConfigTest, SixteenBitFewRowStepsTakeEightWarpsWhereTheRingFits) {
  auto config = [](int32_t head_dim, int32_t batch) {
    const KernelConfig k = ChooseKernelConfig(KvCacheDtype::kAuto, head_dim, batch, 0.0);
    return k.warps * 10 + k.stages;
  };
  EXPECT_EQ(config(128, 1), 83);
  EXPECT_EQ(config(64, 2), 83);
  EXPECT_EQ(config(128, 3), 43);  // three rows on: the default
  EXPECT_EQ(config(128, 128), 43);
  EXPECT_EQ(config(256, 1), 43);  // w8s3's ring at head dim 256 fits no GPU
  KernelConfig c[2];
  ASSERT_EQ(CandidateKernelConfigs(KvCacheDtype::kAuto, 128, c), 2);
  EXPECT_EQ(c[0].warps, DefaultKernelConfig(KvCacheDtype::kAuto).warps);
  EXPECT_EQ(c[1].warps * 10 + c[1].stages, 83);
  EXPECT_EQ(CandidateKernelConfigs(KvCacheDtype::kAuto, 256, c), 1);
  // Every configuration the rule returns is a candidate, so the worker can run it.
  for (KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3}) {
    for (int32_t d : {64, 128, 256}) {
      const int32_t n = CandidateKernelConfigs(kv, d, c);
      for (int32_t batch : {1, 2, 3, 16, 64}) {
        for (double cv : {0.0, 1.5}) {
          const KernelConfig k = ChooseKernelConfig(kv, d, batch, cv);
          bool found = false;
          for (int32_t i = 0; i < n; ++i) found |= c[i].warps == k.warps && c[i].stages == k.stages;
          EXPECT_TRUE(found) << KvCacheDtypeName(kv) << " d=" << d << " B=" << batch;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pkv::decode
