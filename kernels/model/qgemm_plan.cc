#include "kernels/model/qgemm_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pkv::gpu {

bool QGemmSupports(GemvWeightFormat format, int64_t n, int64_t k) {
  return (format == GemvWeightFormat::kInt4 || format == GemvWeightFormat::kFp8) && n > 0 &&
         k > 0 && k % kQGemmStageK == 0;
}

int32_t ChooseQGemmParts(int32_t tiles, int32_t k_stages, int32_t slots) {
  if (tiles <= 0 || slots <= 0) return 1;
  const int32_t cap = std::clamp(k_stages / kQGemmMinStagesPerPart, 1, kQGemmMaxParts);
  return std::clamp(slots / tiles, 1, cap);
}

int32_t ChooseQGemmStages(GemvWeightFormat format, const QGemmDevice& d) {
  const int32_t stage = QGemmStageBytes(format);
  const int32_t fit = (d.smem_per_sm / QGemmCtasPerSm(format) - d.smem_reserved) / stage;
  const int32_t by_block = d.smem_per_block / stage;
  return std::max(2, std::min({fit, by_block, kQGemmMaxStages}));
}

absl::StatusOr<QGemmPlan> PlanQGemm(int32_t m, int32_t n, int32_t k, GemvWeightFormat format,
                                    const QGemmDevice& d, int32_t parts) {
  if (!QGemmSupports(format, n, k) || m < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("qgemm: [", m, "] x [", n, "][", k,
                     "] needs m >= 1, n >= 1, 4-bit or fp8 weights and k a multiple of 128"));
  }
  if (d.num_sms <= 0) return absl::InvalidArgumentError("qgemm: device without SMs");
  QGemmPlan p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.format = format;
  p.row_tiles = (n + kQGemmTileRows - 1) / kQGemmTileRows;
  p.token_tiles = (m + kQGemmTileTokens - 1) / kQGemmTileTokens;
  p.k_stages = k / kQGemmStageK;
  p.stages = ChooseQGemmStages(format, d);
  p.smem_bytes = p.stages * QGemmStageBytes(format);
  if (p.smem_bytes > d.smem_per_block) {
    return absl::InvalidArgumentError(absl::StrCat("qgemm: ", p.smem_bytes,
                                                   " bytes of shared memory exceed the CTA limit ",
                                                   d.smem_per_block));
  }
  p.ctas_per_sm =
      std::clamp(d.smem_per_sm / (p.smem_bytes + d.smem_reserved), 1, QGemmCtasPerSm(format));
  p.parts = parts > 0 ? std::min(parts, p.k_stages)
                      : ChooseQGemmParts(p.tiles(), p.k_stages, d.num_sms * p.ctas_per_sm);
  p.items = p.tiles() * p.parts;
  return p;
}

PackedRoute ChoosePackedRoute(int64_t tokens, GemvWeightFormat format, int64_t n, int64_t k) {
  if (tokens < 1 || !QGemmSupports(format, n, k)) return PackedRoute::kDequantCublas;
  if (tokens <= kQGemmSmallTokens) return PackedRoute::kQGemm;
  if (tokens <= kQGemmMaxRouteTokens && n * k >= kQGemmLargeWeights) return PackedRoute::kQGemm;
  return PackedRoute::kDequantCublas;
}

}  // namespace pkv::gpu
