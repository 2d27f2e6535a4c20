// What a decode-route policy sees of a batch and of the GPU (DESIGN.md, "One request, end to
// end": scheduler -> policy -> planner -> engine).
//
// BatchFeatures are the route-independent part of the planner's PlanFeatures (plan.h): batch
// size, KV bytes, the length summary, the KV shape and the device limits the planner is given.
// They are computed in one pass over the lengths, before any route is planned, so a policy can
// pick the route the planner then plans. ModelInputs are fixed transformations of them (named,
// so a policy file can list the ones its cost model uses); each is bounded so that a batch
// outside the calibration grid cannot push a linear model to absurd predictions.
// Thread-safety: pure functions and plain values.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/decode/plan.h"

namespace pkv::policy {

struct BatchFeatures {
  int32_t batch = 0;           // rows, empty ones included
  int64_t total_kv_bytes = 0;  // K and V bytes the step reads (2-byte elements, as the planner)
  int32_t max_len = 0;
  int32_t min_len = 0;
  double mean_len = 0.0;
  double len_cv = 0.0;  // standard deviation / mean of the lengths
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;
  int32_t num_sms = 0;      // SMs the kernels may use (DeviceLimits::num_sms)
  int32_t ctas_per_sm = 0;  // resident attention CTAs per SM (DeviceLimits::ctas_per_sm)
  // Policy v3, the length shape the summary above misses: rows longer than half the longest row
  // and their tokens. A bimodal batch has a block of long rows, a zipf batch one or a few, with
  // the same batch, bytes, max/min/mean and spread. -1: not known (features rebuilt from
  // PlanFeatures, which does not carry them; measurements.h AttachLengthShape fills them in).
  int32_t long_rows = -1;
  int64_t long_tokens = -1;
  bool has_length_shape() const { return long_rows >= 0 && long_tokens >= 0; }
};

// Two passes over lengths[0..num_rows) (the second counts the rows longer than max / 2). REQUIRES:
// lengths non-negative (the planner checks them).
BatchFeatures SummarizeBatch(const int32_t* lengths, int32_t num_rows, const KvShape& shape,
                             const decode::DeviceLimits& limits);

// The same features from a plan's PlanFeatures (what pkv-bench kernels records as f_* columns).
BatchFeatures FromPlanFeatures(const decode::PlanFeatures& f, const KvShape& shape,
                               const decode::DeviceLimits& limits);

// The transformed inputs a learned cost model may use. Names are part of the policy-file format.
enum class Input : int32_t {
  kOne = 0,            // 1: the intercept
  kLogBytesPerSlot,    // u = ln(1 + (KV bytes / resident slots) / 256 KiB): work per CTA slot
  kLogBytesPerSlotSq,  // u^2: curvature between the launch-bound and the bandwidth-bound ends
  kLogWqImbalance,     // ln of the workqueue's estimated critical path over a balanced one (>= 0)
  kFill,               // (row, kv head) pairs per resident slot, capped at 4
  kLenCv,              // length spread, capped at 4
  kMeanOverMax,        // mean / max length in [0, 1] (1: every row the same length)
  kLog2Batch,          // log2(batch), 0 for an empty batch
  kLogPairMiB,         // ln(1 + bytes of the longest (row, kv head) pair / 1 MiB)
  kLogFusedImbalance,  // ln max(1, longest pair's bytes / bytes per slot): fused's critical path
  // Policy v2 candidates (appended: files naming only the inputs above still load).
  kLogFill,        // ln((row, kv head) pairs per resident slot), in [-8, 4]: uncapped fill
  kTailWave,       // share of the last wave of pairs that is busy, in (0, 1] (1: whole waves)
  kLogMeanLen,     // ln(1 + mean length / 1024 tokens): per-pair work against per-pair overhead
  kLogMaxOverMin,  // ln((1 + max) / (1 + min)) capped at 12: the spread of the extremes
  kLogSlots,       // ln(resident slots / 264): the SM partition (constant within one partition)
  // Policy v3 candidates (length shape; need BatchFeatures::has_length_shape(), else 0).
  kLongFrac,       // rows longer than max / 2, over the batch, in [0, 1]
  kLongTokenFrac,  // their share of the batch's tokens, in [0, 1]
  kCount
};
inline constexpr int kNumInputs = static_cast<int>(Input::kCount);
using ModelInputs = std::array<double, kNumInputs>;

absl::string_view InputName(Input input);
absl::StatusOr<Input> ParseInput(absl::string_view name);

// The first input added by policy v2: inputs before it are the version-1 set.
inline constexpr Input kFirstV2Input = Input::kLogFill;
// The first length-shape input (policy v3): a model using one needs features with the length
// shape (SummarizeBatch computes it; measurements read from a sweep TSV need their traces).
inline constexpr Input kFirstV3Input = Input::kLongFrac;
inline bool IsLengthShapeInput(Input in) { return in >= kFirstV3Input && in < Input::kCount; }

// The split route cuts rows only when the resident slots hold at least two pieces of every
// (row, kv head) pair (decode::SplitFillBound > 1); otherwise it plans one item per pair, exactly
// the fused route. Empty batches: false.
inline bool SplitRouteCuts(const BatchFeatures& f) {
  const int64_t pairs = int64_t{f.batch} * f.num_kv_heads;
  return pairs > 0 && decode::SplitFillBound(int64_t{f.num_sms} * f.ctas_per_sm, pairs) > 1;
}

// All inputs of one batch; O(1), no allocation. Finite for every batch (empty ones included).
// With v2 = false the v2 inputs (kFirstV2Input .. kFirstV3Input) are left 0 (a model that uses none
// of them skips their logarithms: Choose() runs every decode step).
ModelInputs ComputeInputs(const BatchFeatures& f, bool v2 = true);

}  // namespace pkv::policy
