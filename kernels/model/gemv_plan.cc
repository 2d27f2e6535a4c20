#include "kernels/model/gemv_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pkv::gpu {
namespace {

// items / (num_sms * items on the fullest SM): 1 when every SM holds the same number of items.
double Balance(int64_t items, int32_t num_sms) {
  const int64_t fullest = (items + num_sms - 1) / num_sms;
  return static_cast<double>(items) / (static_cast<double>(num_sms) * fullest);
}

}  // namespace

int32_t ChooseGemvParts(int32_t tiles, int32_t units, int32_t num_sms) {
  if (tiles <= 0 || num_sms <= 0 || tiles >= num_sms) return 1;
  const int32_t max_parts = std::clamp(units / (2 * kGemvWarps), 1, kGemvMaxParts);
  int32_t best = 1;
  double best_balance = -1;
  for (int32_t parts = 1; parts <= max_parts; ++parts) {
    const int64_t items = int64_t{tiles} * parts;
    const double balance = Balance(items, num_sms);
    if (items >= 2 * int64_t{num_sms} && balance >= 0.9) return parts;
    if (balance > best_balance + 1e-9) {
      best = parts;
      best_balance = balance;
    }
  }
  return best;
}

absl::StatusOr<GemvPlan> PlanGemv(int32_t n, int32_t k, int32_t group_rows, const GemvDevice& d,
                                  GemvWeightFormat format) {
  const int32_t k_multiple = GemvKMultiple(format);
  if (n <= 0 || k <= 0 || k % k_multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat("gemv: shape [", n, "][", k,
                                                   "] needs n > 0 and k a positive multiple of ",
                                                   k_multiple, " for this weight format"));
  }
  if (group_rows <= 0 || group_rows % kGemvTileRows != 0 ||
      (group_rows > kGemvTileRows && n % group_rows != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemv: row group ", group_rows, " must be a multiple of 16 dividing n = ", n));
  }
  if (d.num_sms <= 0 || d.ctas_per_sm <= 0) {
    return absl::InvalidArgumentError("gemv: device without SMs or resident CTAs");
  }
  GemvPlan p;
  p.n = n;
  p.k = k;
  p.group_rows = group_rows;
  p.format = format;
  p.units = k / (kGemvStepK * GemvUnitSteps(format));
  p.tiles = (n + kGemvTileRows - 1) / kGemvTileRows;
  p.parts = ChooseGemvParts(p.tiles, p.units, d.num_sms);
  p.items = p.tiles * p.parts;
  p.grid = static_cast<int32_t>(std::min<int64_t>(p.items, int64_t{d.num_sms} * d.ctas_per_sm));
  p.x_stage_max_bytes = std::max(0, d.x_stage_max_bytes);
  p.num_sms = d.num_sms;
  p.deep = ChooseGemvDeepBatch(format, p.items, d.num_sms);
  p.group_tiles = decode::FastDivmod::Make(static_cast<uint32_t>(group_rows / kGemvTileRows));
  return p;
}

}  // namespace pkv::gpu
