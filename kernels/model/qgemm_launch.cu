// Argument checks and (dtype, weight format) dispatch of the quantized-weight GEMM (qgemm.h); the
// kernels are compiled in qgemm_int4_bf16.cu, qgemm_fp8_fp16.cu, ...
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/model/gemv_weights.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/qgemm.h"

namespace pkv::gpu {
namespace qgemm {

template <typename T, typename W>
absl::Status LaunchQGemmTyped(const QGemmArgs& a, cudaStream_t stream);
#define PKV_QGEMM_EXTERN(T, W) \
  extern template absl::Status LaunchQGemmTyped<T, W>(const QGemmArgs&, cudaStream_t);
PKV_QGEMM_EXTERN(__half, gemv::Int4Weights)
PKV_QGEMM_EXTERN(__nv_bfloat16, gemv::Int4Weights)
PKV_QGEMM_EXTERN(__half, gemv::Fp8Weights)
PKV_QGEMM_EXTERN(__nv_bfloat16, gemv::Fp8Weights)
#undef PKV_QGEMM_EXTERN

}  // namespace qgemm

namespace {

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("qgemm: ", what));
}

absl::Status CheckPlan(const QGemmPlan& p) {
  const bool tile_ok = p.tile_tokens == 16 || p.tile_tokens == 32 || p.tile_tokens == 64;
  const bool ok = QGemmSupports(p.format, p.n, p.k) && p.m >= 1 && tile_ok &&
                  p.row_tiles == (p.n + kQGemmTileRows - 1) / kQGemmTileRows &&
                  p.token_tiles == (p.m + p.tile_tokens - 1) / p.tile_tokens &&
                  p.k_groups == p.k / 128 &&
                  p.k_stages == (p.k + QGemmStageK(p.format) - 1) / QGemmStageK(p.format) &&
                  p.parts >= 1 && p.parts <= p.k_stages && p.items == p.tiles() * p.parts &&
                  p.stages >= 2 && p.stages <= kQGemmMaxStages &&
                  // 4-bit: the table holds the longest part's groups (its last stage may have one).
                  (p.format == GemvWeightFormat::kInt4
                       ? p.scale_stride >= 2 * ((p.k_stages + p.parts - 1) / p.parts) - 1
                       : p.scale_stride == 0) &&
                  p.smem_bytes == p.stages * p.stage_bytes() + p.table_bytes();
  return ok ? absl::OkStatus() : Invalid("the plan does not come from PlanQGemm");
}

}  // namespace

absl::Status LaunchQGemm(const QGemmArgs& a, cudaStream_t stream) {
  const QGemmPlan& p = a.plan;
  PKV_RETURN_IF_ERROR(CheckPlan(p));
  if (a.w == nullptr || a.x == nullptr || a.y == nullptr || !Aligned(a.w, 16) ||
      !Aligned(a.x, 16)) {
    return Invalid("w, x and y must be set, w and x 16-byte aligned");
  }
  if (p.format == GemvWeightFormat::kInt4 && (a.w_scales == nullptr || !Aligned(a.w_scales, 4))) {
    return Invalid("4-bit weights need their 4-byte aligned scale words");
  }
  if (p.format == GemvWeightFormat::kFp8 &&
      (a.w_scales == nullptr || (a.w_scale_count != 1 && a.w_scale_count != p.n))) {
    return Invalid(absl::StrCat("fp8 weights need float scales, 1 or n = ", p.n, " of them (got ",
                                a.w_scale_count, ")"));
  }
  if (p.parts > 1 && (a.partials == nullptr || a.tickets == nullptr || !Aligned(a.partials, 16))) {
    return Invalid("a split plan needs the 16-byte aligned partials and the tickets workspace");
  }
  if (a.prefetch_stages < 0) return Invalid("prefetch_stages must be >= 0");
  return DispatchDType(a.dtype, [&](auto t) {
    using T = decltype(t);
    if (p.format == GemvWeightFormat::kInt4) {
      return qgemm::LaunchQGemmTyped<T, gemv::Int4Weights>(a, stream);
    }
    return qgemm::LaunchQGemmTyped<T, gemv::Fp8Weights>(a, stream);
  });
}

absl::StatusOr<QGemmDevice> QueryQGemmDevice(int device) {
  QGemmDevice d;
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, device));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&d.smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  int reserved = 0;
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  d.smem_reserved = reserved;
  if (d.num_sms < 1 || d.smem_per_block < 1) {
    return absl::InternalError(absl::StrCat("qgemm: ", d.num_sms, " SMs, ", d.smem_per_block,
                                            " bytes of shared memory per CTA"));
  }
  return d;
}

}  // namespace pkv::gpu
