#include "kernels/decode/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/decode/plan_internal.h"

namespace pkv::decode {

absl::string_view RouteName(Route route) {
  switch (route) {
    case Route::kFused:
      return "fused";
    case Route::kSplit:
      return "split";
    case Route::kWorkqueue:
      return "workqueue";
    case Route::kBucketedExact:
      return "bucketed-exact";
    case Route::kPersistent:
      return "persistent";
  }
  return "unknown";
}

absl::StatusOr<Route> ParseRoute(absl::string_view name) {
  for (int i = 0; i < kNumRoutes; ++i) {
    if (RouteName(static_cast<Route>(i)) == name) return static_cast<Route>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown decode route '", name,
                   "'; supported: fused, split, workqueue, bucketed-exact, persistent"));
}

absl::Status ValidateShape(const KvShape& s) {
  if (s.num_kv_heads <= 0 || s.num_q_heads <= 0 || s.num_q_heads % s.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_q_heads (", s.num_q_heads, ") must be a positive multiple of ",
                     "num_kv_heads (", s.num_kv_heads, "); supported groups: 1..8"));
  }
  if (s.group_size() > kMaxGroupSize) {
    return absl::InvalidArgumentError(absl::StrCat("group size H_q/H_kv = ", s.group_size(),
                                                   " is not supported; supported: 1..8"));
  }
  if (s.kv_elem_bytes != 1 && s.kv_elem_bytes != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_elem_bytes ", s.kv_elem_bytes, " is not supported; supported: 2 (fp16/bf16), 1 (FP8)"));
  }
  if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", s.head_dim, " is not supported; supported: 64, 128, 256"));
  }
  if (s.page_size < 1 || s.page_size > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", s.page_size, " is not supported; supported: 1..128"));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ValidateInput(const PlanInput& in, const DeviceLimits& limits,
                           const PlanOptions& options) {
  PKV_RETURN_IF_ERROR(ValidateShape(in.shape));
  if (in.num_rows < 0 ||
      (in.num_rows > 0 && (in.lengths == nullptr || in.page_indptr == nullptr))) {
    return absl::InvalidArgumentError("decode plan: num_rows < 0 or missing lengths/page_indptr");
  }
  if (limits.num_sms <= 0 || limits.ctas_per_sm <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("decode plan: device limits need num_sms > 0 ",
                                                   "and ctas_per_sm > 0, got ", limits.num_sms,
                                                   ", ", limits.ctas_per_sm));
  }
  if (options.max_splits < 1 || options.max_splits > kMaxSplitsPerPair ||
      options.min_split_tokens < 1 || options.min_split_kv_elems < 0 ||
      options.min_split_kv_elems > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode plan: max_splits must be in 1..", kMaxSplitsPerPair,
                     ", min_split_tokens >= 1 and min_split_kv_elems in 0..2^40"));
  }
  if (options.capacity_rows > 0 && in.num_rows > options.capacity_rows) {
    return absl::InvalidArgumentError(absl::StrCat("decode plan: ", in.num_rows,
                                                   " rows exceed the graph capacity of ",
                                                   options.capacity_rows));
  }
  if (options.capacity_rows > 0 && options.route == Route::kBucketedExact) {
    return absl::InvalidArgumentError(
        "decode plan: bucketed-exact launches a data-dependent number of kernels and cannot be "
        "planned for a fixed-capacity (CUDA graph) workspace");
  }
  if (in.num_rows > 0 && in.page_indptr[0] != 0) {
    return absl::InvalidArgumentError("decode plan: page_indptr[0] must be 0");
  }
  for (int32_t r = 0; r < in.num_rows; ++r) {
    const int32_t len = in.lengths[r];
    const int64_t pages = in.page_indptr[r + 1] - int64_t{in.page_indptr[r]};
    if (len < 0) {
      return absl::InvalidArgumentError(absl::StrCat("decode plan: row ", r, " has length ", len));
    }
    if (pages < 0 || pages * in.shape.page_size < len) {
      return absl::InvalidArgumentError(absl::StrCat("decode plan: row ", r, " of length ", len,
                                                     " has ", pages, " pages of ",
                                                     in.shape.page_size, " tokens"));
    }
  }
  return absl::OkStatus();
}

void ComputeFeatures(const PlanInput& in, DecodePlan* plan) {
  PlanFeatures& f = plan->features;
  PlanCounters& c = plan->counters;
  f = PlanFeatures{};
  f.batch = in.num_rows;
  int64_t sum = 0;
  double sum_sq = 0.0;
  f.min_len = in.num_rows > 0 ? in.lengths[0] : 0;
  for (int32_t r = 0; r < in.num_rows; ++r) {
    const int32_t len = in.lengths[r];
    sum += len;
    sum_sq += static_cast<double>(len) * len;
    f.max_len = std::max(f.max_len, len);
    f.min_len = std::min(f.min_len, len);
  }
  const KvShape& s = in.shape;
  c.kv_bytes = sum * s.num_kv_heads * s.head_dim * 2 /*K and V*/ * s.kv_elem_bytes;
  f.total_kv_bytes = c.kv_bytes;
  if (in.num_rows > 0) {
    f.mean_len = static_cast<double>(sum) / in.num_rows;
    const double var = std::max(0.0, sum_sq / in.num_rows - f.mean_len * f.mean_len);
    f.len_cv = f.mean_len > 0 ? std::sqrt(var) / f.mean_len : 0.0;
  }
}

// DecodePlan::item_pids from the host block table (cleared when there is none).
void FillItemPagePrefix(const PlanInput& in, DecodePlan* plan) {
  plan->item_pids.clear();
  if (in.page_ids == nullptr) return;
  const int32_t ps = in.shape.page_size;
  plan->item_pids.resize(plan->items.size() * kItemPagePrefix, 0);
  int32_t* dst = plan->item_pids.data();
  for (const WorkItem& it : plan->items) {
    const int32_t first_page = it.token_begin / ps;
    const int32_t pages = (it.token_end - it.token_begin + ps - 1) / ps;
    const int32_t* src = in.page_ids + it.page_base + first_page;
    for (int32_t k = 0; k < std::min(pages, kItemPagePrefix); ++k) dst[k] = src[k];
    dst += kItemPagePrefix;
  }
}

void ComputeCounters(DecodePlan* plan) {
  PlanCounters& c = plan->counters;
  const int64_t g = plan->shape.group_size();
  const int64_t o_bytes = g * plan->shape.head_dim * 4;
  c.launches = static_cast<int32_t>(plan->launches.size());
  c.items = static_cast<int32_t>(plan->items.size());
  c.items_nonempty = 0;
  c.merge_state_bytes = 0;
  c.ctas = 0;
  for (const LaunchSpec& l : plan->launches) c.ctas += l.grid;
  for (const WorkItem& it : plan->items) {
    const bool nonempty = it.token_end > it.token_begin;
    c.items_nonempty += nonempty ? 1 : 0;
    // A split writes its LSE (and its output if it read anything); the merge reads both back.
    if (it.num_splits > 1) c.merge_state_bytes += 2 * (g * 4 + (nonempty ? o_bytes : 0));
  }
  c.num_merges = 0;
  for (const WorkItem& it : plan->items) c.num_merges += (it.num_splits > 1 && it.split_index == 0);
  plan->features.items_nonempty = c.items_nonempty;
  plan->features.launches = c.launches;
}

}  // namespace

absl::Status PlanDecode(const PlanInput& input, const DeviceLimits& limits,
                        const PlanOptions& options, DecodePlan* plan) {
  const auto t0 = std::chrono::steady_clock::now();
  PKV_RETURN_IF_ERROR(ValidateInput(input, limits, options));
  plan->route = options.route;
  plan->merge = options.route == Route::kBucketedExact ? MergeMode::kSeparate : options.merge;
  plan->shape = input.shape;
  plan->num_rows = input.num_rows;
  plan->graph_sized = options.capacity_rows > 0;
  plan->items.clear();
  plan->cta_item_indptr.clear();
  plan->merges.clear();
  plan->launches.clear();
  plan->counters = PlanCounters{};
  ComputeFeatures(input, plan);
  plan->features.num_sms = limits.num_sms;
  plan->scratch.row_pages.resize(input.num_rows);
  for (int32_t r = 0; r < input.num_rows; ++r) {
    plan->scratch.row_pages[r] =
        (input.lengths[r] + input.shape.page_size - 1) / input.shape.page_size;
  }
  internal::PlanContext ctx{input, limits, options, plan, plan->scratch.row_pages.data()};
  ctx.min_split_pages = internal::SplitFloorPages(input.shape, options);
  switch (options.route) {
    case Route::kFused:
      internal::PlanFused(ctx);
      break;
    case Route::kSplit:
      internal::PlanSplit(ctx);
      break;
    case Route::kWorkqueue:
      internal::PlanWorkqueue(ctx);
      break;
    case Route::kBucketedExact:
      internal::PlanBucketedExact(ctx);
      break;
    case Route::kPersistent:
      internal::PlanPersistent(ctx);
      break;
  }
  plan->counters.num_partials = ctx.num_partials;
  FillItemPagePrefix(input, plan);
  ComputeCounters(plan);
  plan->counters.plan_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return absl::OkStatus();
}

}  // namespace pkv::decode
