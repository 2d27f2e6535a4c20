#include "kernels/decode/workspace.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pkv::decode {
namespace {

int64_t AlignUp(int64_t x) { return (x + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// Reserves `bytes` at the cursor and returns the region's offset; copies `src` there in filling
// mode. Both modes walk this same code, so offsets cannot differ between them.
int64_t Region(int64_t* cursor, int64_t bytes, uint8_t* image, const void* src, int64_t src_bytes) {
  const int64_t offset = AlignUp(*cursor);
  if (image != nullptr && src_bytes > 0) std::memcpy(image + offset, src, src_bytes);
  *cursor = offset + bytes;
  return offset;
}

}  // namespace

PlanSizes SizesOf(const DecodePlan& plan) {
  PlanSizes s;
  s.items = static_cast<int32_t>(plan.items.size());
  s.ctas = plan.cta_item_indptr.empty() ? 0 : static_cast<int32_t>(plan.cta_item_indptr.size()) - 1;
  s.merges = static_cast<int32_t>(plan.merges.size());
  s.partials = plan.counters.num_partials;
  s.pairs = plan.num_rows * plan.shape.num_kv_heads;
  return s;
}

PlanSizes CapacityFor(int32_t max_rows, const KvShape& shape, const DeviceLimits& limits,
                      const PlanOptions& options) {
  // Every route emits at most one item per (row, kv head) plus what its split rule adds on top:
  // split: B*H*S < slots + B*H; workqueue: sum ceil(p/c) <= P/c + B*H with P/c <= kMaxWaves*slots;
  // persistent: pieces <= grid + B*H with grid <= slots;
  const int64_t pairs = static_cast<int64_t>(max_rows) * shape.num_kv_heads;
  const int64_t slots = std::max(1, limits.slots());
  // bucketed-exact splits every distinct length on its own to fill the GPU: up to one grid of
  // slots per row.
  const int64_t extra =
      options.route == Route::kBucketedExact ? int64_t{max_rows} * slots : kMaxWaves * slots;
  PlanSizes s;
  s.pairs = static_cast<int32_t>(pairs);
  s.items = static_cast<int32_t>(pairs + extra);
  s.ctas = static_cast<int32_t>(slots);
  s.merges = static_cast<int32_t>(pairs);
  s.partials = s.items;
  return s;
}

WorkspaceLayout LayoutWorkspace(const PlanSizes& sizes, const KvShape& shape,
                                const DecodePlan* plan, uint8_t* image) {
  const bool fill = plan != nullptr && image != nullptr;
  WorkspaceLayout l;
  int64_t cur = 0;
  int32_t header[4] = {0, 0, 0, 0};
  if (fill) {
    const PlanSizes used = SizesOf(*plan);
    header[0] = used.items;
    header[1] = used.ctas;
    header[2] = used.merges;
    header[3] = plan->num_rows;
  }
  l.header = Region(&cur, sizeof(header), fill ? image : nullptr, header, sizeof(header));
  const int64_t indptr_n = sizes.ctas > 0 ? sizes.ctas + 1 : 0;
  l.cta_indptr = Region(&cur, indptr_n * 4, fill ? image : nullptr,
                        fill ? plan->cta_item_indptr.data() : nullptr,
                        fill ? static_cast<int64_t>(plan->cta_item_indptr.size()) * 4 : 0);
  l.merges = Region(&cur, int64_t{sizes.merges} * sizeof(MergeEntry), fill ? image : nullptr,
                    fill ? plan->merges.data() : nullptr,
                    fill ? static_cast<int64_t>(plan->merges.size() * sizeof(MergeEntry)) : 0);
  const int64_t used_items = fill ? static_cast<int64_t>(plan->items.size()) : sizes.items;
  l.items = Region(&cur, int64_t{sizes.items} * sizeof(WorkItem), fill ? image : nullptr,
                   fill ? plan->items.data() : nullptr, used_items * int64_t{sizeof(WorkItem)});
  l.upload_bytes = l.items + used_items * int64_t{sizeof(WorkItem)};
  const int64_t pid_bytes = fill ? static_cast<int64_t>(plan->item_pids.size()) * 4 : 0;
  l.item_pids = Region(&cur, int64_t{sizes.items} * kItemPagePrefix * 4, fill ? image : nullptr,
                       fill ? plan->item_pids.data() : nullptr, pid_bytes);
  l.upload_pid_bytes = pid_bytes;
  const int64_t g = shape.group_size();
  l.partial_lse = Region(&cur, int64_t{sizes.partials} * g * 4, nullptr, nullptr, 0);
  l.partial_o = Region(&cur, int64_t{sizes.partials} * g * shape.head_dim * 4, nullptr, nullptr, 0);
  l.counters_bytes = int64_t{sizes.pairs} * 4;
  l.counters = Region(&cur, l.counters_bytes, nullptr, nullptr, 0);
  l.total_bytes = AlignUp(cur);
  return l;
}

absl::Status CheckFits(const DecodePlan& plan, const PlanSizes& capacity) {
  const PlanSizes s = SizesOf(plan);
  auto check = [](const char* what, int32_t used, int32_t cap) -> absl::Status {
    if (used <= cap) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("decode plan needs ", used, " ", what, " but the workspace holds ", cap));
  };
  for (absl::Status st :
       {check("items", s.items, capacity.items), check("persistent CTAs", s.ctas, capacity.ctas),
        check("merge entries", s.merges, capacity.merges),
        check("partial states", s.partials, capacity.partials),
        check("(row, kv head) tickets", s.pairs, capacity.pairs)}) {
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace pkv::decode
