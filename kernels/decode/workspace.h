// The device workspace of the decode engine and the host image of a plan that is copied into it.
//
// One device buffer per batch-size bucket holds, at fixed offsets (each region 256-byte aligned):
//   header      int32[4]     {num_items, num_ctas, num_merges, num_rows}  (read by graph launches)
//   cta_indptr  int32[ctas + 1]                 persistent route: CTA -> items
//   merges      MergeEntry[merges]              separate-merge launches
//   items       WorkItem[items]
//   item_pids   int32[items][kItemPagePrefix]   each item's first page ids (plans made with the
//                                               host block table; see DecodePlan::item_pids)
//   ---------------------------------------- the regions above are the per-step upload
//   partial_lse float[partials][group]          log2 units (see decode_params.h)
//   partial_o   float[partials][group][head_dim]
//   counters    int32[pairs]                    merge tickets; zero between launches
// Sizes come from PlanSizes: the plan's own (exact fit) or CapacityFor (fixed offsets, so one
// captured CUDA graph serves every plan of the bucket). LayoutWorkspace is the one function that
// both computes the layout (counting mode, image == nullptr) and writes a plan's upload image
// (filling mode), so the two cannot drift apart.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/decode/plan.h"

namespace pkv::decode {

inline constexpr int64_t kWorkspaceAlign = 256;
inline constexpr int32_t kMaxWaves = 4;  // workqueue plans at most this many waves of items

struct PlanSizes {
  int32_t items = 0;
  int32_t ctas = 0;  // persistent grid (cta_indptr holds ctas + 1 entries)
  int32_t merges = 0;
  int32_t partials = 0;
  int32_t pairs = 0;  // rows * kv heads: one merge ticket each
};

struct WorkspaceLayout {
  int64_t header = 0;
  int64_t cta_indptr = 0;
  int64_t merges = 0;
  int64_t items = 0;
  int64_t upload_bytes = 0;  // bytes of the image to copy: header .. end of the plan's items
  int64_t item_pids = 0;
  int64_t upload_pid_bytes = 0;  // then these bytes from item_pids (0: the plan has no prefix)
  int64_t partial_lse = 0;
  int64_t partial_o = 0;
  int64_t counters = 0;
  int64_t counters_bytes = 0;
  int64_t total_bytes = 0;  // device bytes the workspace needs
};

// Exact sizes of one plan.
PlanSizes SizesOf(const DecodePlan& plan);

// Sizes that bound every plan with at most `max_rows` rows for this shape, limits and options
// (routes fused, split, workqueue, persistent; bucketed-exact is not graph-capturable).
PlanSizes CapacityFor(int32_t max_rows, const KvShape& shape, const DeviceLimits& limits,
                      const PlanOptions& options);

// Counting mode (plan == nullptr, image == nullptr): the layout for `sizes`.
// Filling mode: also writes `plan` into `image`, host memory of at least the counting layout's
// partial_lse bytes (the upload region), and sets upload_bytes to the bytes this plan uses.
// REQUIRES: SizesOf(*plan) fits `sizes` (checked by CheckFits).
WorkspaceLayout LayoutWorkspace(const PlanSizes& sizes, const KvShape& shape,
                                const DecodePlan* plan, uint8_t* image);

// INVALID_ARGUMENT naming the first region where `plan` exceeds `capacity`.
absl::Status CheckFits(const DecodePlan& plan, const PlanSizes& capacity);

}  // namespace pkv::decode
