#include "kernels/model/qgemm_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pkv::gpu {

namespace {

// 4-bit: scale groups (two a stage) of the longest part (the scale table's row).
int32_t MaxPartGroups(const QGemmPlan& p) {
  int32_t most = 0;
  for (int32_t part = 0; part < p.parts; ++part) {
    const int32_t lo = QGemmPartBegin(p.k_stages, p.parts, part) * 2;
    const int32_t hi = std::min(QGemmPartBegin(p.k_stages, p.parts, part + 1) * 2, p.k_groups);
    most = std::max(most, hi - lo);
  }
  return most;
}

// Fills parts, scale_stride, stages and smem_bytes for p's tile at `ctas` CTAs per SM; false when
// two stages and the table do not fit at any split.
bool FitParts(const QGemmDevice& d, int32_t ctas, int32_t forced, QGemmPlan* p) {
  p->parts = forced > 0 ? std::min(forced, p->k_stages)
                        : ChooseQGemmParts(p->tiles(), p->k_stages, d.num_sms * ctas);
  for (; p->parts <= p->k_stages; ++p->parts) {
    p->scale_stride = 0;
    if (p->format == GemvWeightFormat::kInt4) {
      const int32_t groups = MaxPartGroups(*p);
      if (groups > kQGemmMaxPartGroups) continue;
      p->scale_stride = groups | 1;
    }
    p->stages = ChooseQGemmStages(p->stage_bytes(), p->table_bytes(), ctas, d);
    if (p->stages >= 2) {
      p->smem_bytes = p->stages * p->stage_bytes() + p->table_bytes();
      return true;
    }
  }
  return false;
}

}  // namespace

bool QGemmSupports(GemvWeightFormat format, int64_t n, int64_t k) {
  return (format == GemvWeightFormat::kInt4 || format == GemvWeightFormat::kFp8) && n > 0 &&
         k > 0 && k % 128 == 0 &&
         (format != GemvWeightFormat::kInt4 || k / 128 <= kQGemmMaxParts * kQGemmMaxPartGroups);
}

int32_t ChooseQGemmTileTokens(int32_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : 64; }

int32_t ChooseQGemmParts(int32_t tiles, int32_t k_stages, int32_t slots) {
  if (tiles <= 0 || slots <= 0) return 1;
  const int32_t cap = std::clamp(k_stages / kQGemmMinStagesPerPart, 1, kQGemmMaxParts);
  return std::clamp(slots / tiles, 1, cap);
}

int32_t ChooseQGemmStages(int32_t stage_bytes, int32_t table_bytes, int32_t ctas,
                          const QGemmDevice& d) {
  const int32_t per_cta =
      std::min(d.smem_per_sm / std::max(ctas, 1) - d.smem_reserved, d.smem_per_block);
  return std::min((per_cta - table_bytes) / stage_bytes, kQGemmMaxStages);
}

absl::StatusOr<QGemmPlan> PlanQGemm(int32_t m, int32_t n, int32_t k, GemvWeightFormat format,
                                    const QGemmDevice& d, int32_t parts) {
  if (!QGemmSupports(format, n, k) || m < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qgemm: [", m, "] x [", n, "][", k,
        "] needs m >= 1, n >= 1, 4-bit or fp8 weights and k a multiple of 128 (4-bit: <= 65536)"));
  }
  if (d.num_sms <= 0) return absl::InvalidArgumentError("qgemm: device without SMs");
  QGemmPlan p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.format = format;
  p.row_tiles = (n + kQGemmTileRows - 1) / kQGemmTileRows;
  p.k_groups = k / 128;
  p.k_stages = (k + QGemmStageK(format) - 1) / QGemmStageK(format);
  for (p.tile_tokens = ChooseQGemmTileTokens(m); p.tile_tokens >= 16; p.tile_tokens /= 2) {
    p.token_tiles = (m + p.tile_tokens - 1) / p.tile_tokens;
    for (int32_t ctas = QGemmCtasPerSm(format, p.tile_tokens); ctas >= 1; --ctas) {
      if (!FitParts(d, ctas, parts, &p)) continue;
      p.ctas_per_sm = std::clamp(d.smem_per_sm / (p.smem_bytes + d.smem_reserved), 1,
                                 QGemmCtasPerSm(format, p.tile_tokens));
      p.items = p.tiles() * p.parts;
      return p;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("qgemm: two ring stages of [", n, "][", k,
                                                 "] do not fit ", d.smem_per_block,
                                                 " bytes of shared memory per CTA"));
}

PackedRoute ChoosePackedRoute(int64_t tokens, GemvWeightFormat format, int64_t n, int64_t k) {
  if (tokens < 1 || !QGemmSupports(format, n, k)) return PackedRoute::kDequantCublas;
  if (tokens <= kQGemmSmallTokens) return PackedRoute::kQGemm;
  if (tokens <= kQGemmMaxRouteTokens && n * k >= kQGemmLargeWeights) return PackedRoute::kQGemm;
  return PackedRoute::kDequantCublas;
}

}  // namespace pkv::gpu
