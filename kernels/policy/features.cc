#include "kernels/policy/features.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/decode/workspace.h"

namespace pkv::policy {

BatchFeatures SummarizeBatch(const int32_t* lengths, int32_t num_rows, const KvShape& shape,
                             const decode::DeviceLimits& limits) {
  // The same arithmetic as the planner's ComputeFeatures (plan.cc), so a feature computed here
  // equals the f_* column pkv-bench kernels records for the same lengths.
  decode::PlanFeatures f;
  f.batch = num_rows;
  int64_t sum = 0;
  double sum_sq = 0.0;
  f.min_len = num_rows > 0 ? lengths[0] : 0;
  for (int32_t r = 0; r < num_rows; ++r) {
    const int32_t len = lengths[r];
    sum += len;
    sum_sq += static_cast<double>(len) * len;
    f.max_len = std::max(f.max_len, len);
    f.min_len = std::min(f.min_len, len);
  }
  f.total_kv_bytes = sum * shape.num_kv_heads * shape.head_dim * 2 /*K and V*/ * 2 /*bytes*/;
  if (num_rows > 0) {
    f.mean_len = static_cast<double>(sum) / num_rows;
    const double var = std::max(0.0, sum_sq / num_rows - f.mean_len * f.mean_len);
    f.len_cv = f.mean_len > 0 ? std::sqrt(var) / f.mean_len : 0.0;
  }
  BatchFeatures b = FromPlanFeatures(f, shape, limits);
  // Length shape: needs the max first, so a second pass (256 rows: a few tens of ns).
  int32_t long_rows = 0;
  int64_t long_tokens = 0;
  for (int32_t r = 0; r < num_rows; ++r) {
    const int32_t len = lengths[r];
    if (2 * static_cast<int64_t>(len) > f.max_len) {
      ++long_rows;
      long_tokens += len;
    }
  }
  b.long_rows = long_rows;
  b.long_tokens = long_tokens;
  return b;
}

BatchFeatures FromPlanFeatures(const decode::PlanFeatures& f, const KvShape& shape,
                               const decode::DeviceLimits& limits) {
  BatchFeatures b;
  b.batch = f.batch;
  b.total_kv_bytes = f.total_kv_bytes;
  b.max_len = f.max_len;
  b.min_len = f.min_len;
  b.mean_len = f.mean_len;
  b.len_cv = f.len_cv;
  b.num_kv_heads = shape.num_kv_heads;
  b.head_dim = shape.head_dim;
  b.page_size = shape.page_size;
  b.num_sms = limits.num_sms;
  b.ctas_per_sm = limits.ctas_per_sm;
  return b;
}

namespace {

constexpr const char* kInputNames[kNumInputs] = {
    "one",
    "log_bytes_per_slot",
    "log_bytes_per_slot_sq",
    "log_wq_imbalance",
    "fill",
    "len_cv",
    "mean_over_max",
    "log2_batch",
    "log_pair_mib",
    "log_fused_imbalance",
    "log_fill",
    "tail_wave",
    "log_mean_len",
    "log_max_over_min",
    "log_slots",
    "long_frac",
    "long_token_frac",
};

// Estimated critical path of a workqueue plan over the balanced one (bytes per resident slot).
// The planner (plan_routes.cc, PlanWorkqueue) allows at most kMaxWaves waves of items: every
// (row, kv head) gets one item, and what is left of kMaxWaves * slots splits the long rows. With
// only the length summary, model the batch as rows_eq = sum / max rows of the longest length
// (the rest of the rows holding no work): per kv head the spare items are
// kMaxWaves * slots / H_kv - B, so a long row gets about spare / rows_eq + 1 splits and its
// biggest item is pair_bytes / splits. Example (132 SMs x 2 = 264 slots, H_kv = 8): zipf B = 128
// with max 32512 tokens and 2.48 GB: rows_eq = 18.6, spare = 132 - 128 = 4, splits = 1.2,
// biggest item 16.6 MB / 1.2 = 13.8 MB against 9.4 MB per slot: imbalance 1.47 (the persistent
// route, which balances bytes exactly, measured 1.12x faster there). For B <= 64 the spare
// items cover the long rows and the estimate is 1.
double WqImbalance(const BatchFeatures& f, double slots, double bytes_per_slot) {
  if (f.max_len <= 0 || f.num_kv_heads <= 0 || bytes_per_slot <= 0) return 1.0;
  const double pair_bytes = 4.0 * f.head_dim * f.max_len;
  const double rows_eq = std::max(1.0, f.mean_len * f.batch / f.max_len);
  const double spare = decode::kMaxWaves * slots / f.num_kv_heads - f.batch;
  const double splits = std::max(1.0, spare / rows_eq + 1.0);
  return std::max(1.0, pair_bytes / splits / bytes_per_slot);
}

}  // namespace

absl::string_view InputName(Input input) {
  const int i = static_cast<int>(input);
  return i >= 0 && i < kNumInputs ? kInputNames[i] : "unknown";
}

absl::StatusOr<Input> ParseInput(absl::string_view name) {
  for (int i = 0; i < kNumInputs; ++i) {
    if (name == kInputNames[i]) return static_cast<Input>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown cost-model input '", name, "'"));
}

ModelInputs ComputeInputs(const BatchFeatures& f, bool v2) {
  ModelInputs x{};
  const double slots = std::max(1.0, static_cast<double>(f.num_sms) * f.ctas_per_sm);
  const double per_slot = static_cast<double>(std::max<int64_t>(f.total_kv_bytes, 0)) / slots;
  const double u = std::log1p(per_slot / (256.0 * 1024.0));
  const double pairs = static_cast<double>(f.batch) * std::max(f.num_kv_heads, 0);
  x[static_cast<int>(Input::kOne)] = 1.0;
  x[static_cast<int>(Input::kLogBytesPerSlot)] = u;
  x[static_cast<int>(Input::kLogBytesPerSlotSq)] = u * u;
  x[static_cast<int>(Input::kLogWqImbalance)] = std::log(WqImbalance(f, slots, per_slot));
  x[static_cast<int>(Input::kFill)] = std::min(4.0, pairs / slots);
  x[static_cast<int>(Input::kLenCv)] = std::clamp(f.len_cv, 0.0, 4.0);
  x[static_cast<int>(Input::kMeanOverMax)] =
      f.max_len > 0 ? std::clamp(f.mean_len / f.max_len, 0.0, 1.0) : 1.0;
  x[static_cast<int>(Input::kLog2Batch)] =
      f.batch > 0 ? std::log2(static_cast<double>(f.batch)) : 0;
  const double pair_bytes = 4.0 * f.head_dim * std::max(f.max_len, 0);
  x[static_cast<int>(Input::kLogPairMiB)] = std::log1p(pair_bytes / (1024.0 * 1024.0));
  if (f.has_length_shape() && f.batch > 0) {
    // Exact token count from the bytes (the recorded mean length is rounded).
    const double bytes_per_token = 4.0 * f.head_dim * f.num_kv_heads;
    const double tokens =
        bytes_per_token > 0 ? f.total_kv_bytes / bytes_per_token : f.mean_len * f.batch;
    x[static_cast<int>(Input::kLongFrac)] =
        std::clamp(static_cast<double>(f.long_rows) / f.batch, 0.0, 1.0);
    x[static_cast<int>(Input::kLongTokenFrac)] =
        tokens > 0 ? std::clamp(static_cast<double>(f.long_tokens) / tokens, 0.0, 1.0) : 0.0;
  }
  // The fused route runs one CTA per (row, kv head): its step lasts at least as long as the
  // longest pair streams on one CTA, against per_slot bytes for a balanced route.
  x[static_cast<int>(Input::kLogFusedImbalance)] =
      per_slot > 0 ? std::log(std::max(1.0, pair_bytes / per_slot)) : 0.0;
  if (!v2) return x;
  const double fill = pairs / slots;
  x[static_cast<int>(Input::kLogFill)] = fill > 0 ? std::clamp(std::log(fill), -8.0, 4.0) : -8.0;
  // Pairs run in ceil(fill) waves of `slots`; the last one holds fill - (ceil(fill) - 1) of a wave.
  x[static_cast<int>(Input::kTailWave)] = fill > 0 ? fill - (std::ceil(fill) - 1.0) : 1.0;
  x[static_cast<int>(Input::kLogMeanLen)] = std::log1p(std::max(f.mean_len, 0.0) / 1024.0);
  x[static_cast<int>(Input::kLogMaxOverMin)] =
      std::min(12.0, std::log((1.0 + std::max(f.max_len, 0)) / (1.0 + std::max(f.min_len, 0))));
  x[static_cast<int>(Input::kLogSlots)] = std::log(slots / 264.0);
  return x;
}

}  // namespace pkv::policy
