// Argument checks and (dtype, weight format) dispatch of the fused GEMV (gemv.h); the kernels
// themselves are compiled in gemv_bf16.cu, gemv_int4_fp16.cu, ...
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/model/gemv.h"
#include "kernels/model/gemv_weights.cuh"
#include "kernels/model/model_device.cuh"

// PKV_GEMV_X_STAGE (CMake option of the same name, on by default): QueryGemvDevice gives plans a
// staging budget, so launches stage x (gemv.h); 0 builds plans that read x per step.
#ifndef PKV_GEMV_X_STAGE
#define PKV_GEMV_X_STAGE 1
#endif

namespace pkv::gpu {
namespace gemv {

template <typename T, typename W>
absl::Status LaunchGemvTyped(const GemvArgs& a, cudaStream_t stream);
template <typename T, typename W>
absl::Status GemvCtasPerSm(int stage_optin, int* ctas, int* static_smem);
#define PKV_GEMV_EXTERN(T, W)                                                        \
  extern template absl::Status LaunchGemvTyped<T, W>(const GemvArgs&, cudaStream_t); \
  extern template absl::Status GemvCtasPerSm<T, W>(int, int*, int*);
PKV_GEMV_EXTERN(__half, DenseWeights)
PKV_GEMV_EXTERN(__nv_bfloat16, DenseWeights)
PKV_GEMV_EXTERN(__half, Int4Weights)
PKV_GEMV_EXTERN(__nv_bfloat16, Int4Weights)
PKV_GEMV_EXTERN(__half, Fp8Weights)
PKV_GEMV_EXTERN(__nv_bfloat16, Fp8Weights)
#undef PKV_GEMV_EXTERN

// Calls fn(W{}) for the weight policy of `format`.
template <typename Fn>
absl::Status DispatchFormat(GemvWeightFormat format, Fn&& fn) {
  switch (format) {
    case GemvWeightFormat::kDense:
      return fn(DenseWeights{});
    case GemvWeightFormat::kInt4:
      return fn(Int4Weights{});
    case GemvWeightFormat::kFp8:
      return fn(Fp8Weights{});
  }
  return absl::InvalidArgumentError("gemv: unknown weight format; supported: dense, int4, fp8");
}

}  // namespace gemv

namespace {

__global__ void PdlProbeKernel() {}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("gemv: ", what));
}

absl::Status CheckInput(const GemvArgs& a) {
  const GemvPlan& p = a.plan;
  if (a.tokens < 1 || a.tokens > kGemvMaxTokens) {
    return Invalid(absl::StrCat(a.tokens, " tokens; supported: 1..", kGemvMaxTokens));
  }
  if (p.n <= 0 || p.k <= 0 || p.k % GemvKMultiple(p.format) != 0 ||
      p.units != p.k / (kGemvStepK * GemvUnitSteps(p.format)) || p.parts < 1 ||
      p.parts > kGemvMaxParts || p.tiles != (p.n + kGemvTileRows - 1) / kGemvTileRows ||
      p.items != p.tiles * p.parts || p.grid < 1 || p.grid > p.items ||
      p.group_rows % kGemvTileRows != 0 ||
      (p.group_rows > kGemvTileRows && p.n % p.group_rows != 0) ||
      p.group_tiles.divisor != static_cast<uint32_t>(p.group_rows / kGemvTileRows)) {
    return Invalid("the plan does not come from PlanGemv");
  }
  if (a.w == nullptr || a.x == nullptr || !Aligned16(a.w) || !Aligned16(a.x)) {
    return Invalid("w and x must be non-null and 16-byte aligned");
  }
  if (a.input == GemvInput::kRmsNorm && (a.norm_weight == nullptr || !Aligned16(a.norm_weight) ||
                                         a.sum_sq_parts == nullptr || a.num_sum_sq_parts < 1)) {
    return Invalid("rmsnorm input needs a 16-byte aligned norm weight and sum-of-squares parts");
  }
  if (p.format == GemvWeightFormat::kInt4 &&
      (a.w_scales == nullptr || reinterpret_cast<uintptr_t>(a.w_scales) % 4 != 0)) {
    return Invalid("4-bit weights need their 4-byte aligned scale words");
  }
  if (p.format == GemvWeightFormat::kFp8 &&
      (a.w_scales == nullptr || (a.w_scale_count != 1 && a.w_scale_count != p.n))) {
    return Invalid(absl::StrCat("fp8 weights need float scales, 1 or n = ", p.n, " of them (got ",
                                a.w_scale_count, ")"));
  }
  if (p.parts > 1 && (a.partials == nullptr || a.tickets == nullptr)) {
    return Invalid("a split plan needs the partials and tickets workspace");
  }
  return absl::OkStatus();
}

absl::Status CheckEpilogue(const GemvArgs& a) {
  const GemvPlan& p = a.plan;
  switch (a.epilogue) {
    case GemvEpilogue::kStore:
      if (a.y == nullptr) return Invalid("store epilogue needs y");
      return absl::OkStatus();
    case GemvEpilogue::kResidual:
      if (a.residual == nullptr || a.sum_sq_out == nullptr || p.group_rows != kGemvTileRows ||
          p.n % kGemvTileRows != 0) {
        return Invalid(
            absl::StrCat("residual epilogue needs residual, sum_sq_out, contiguous rows "
                         "and n a multiple of 16 (n = ",
                         p.n, ")"));
      }
      return absl::OkStatus();
    case GemvEpilogue::kRopeKv:
      if (a.head_dim <= 0 || a.head_dim % kGemvTileRows != 0 || p.group_rows != a.head_dim ||
          a.num_q_heads <= 0 || a.num_kv_heads <= 0 ||
          p.n != (a.num_q_heads + 2 * a.num_kv_heads) * a.head_dim || a.page_size <= 0 ||
          a.positions == nullptr || a.kv_slots == nullptr || a.inv_freq == nullptr ||
          a.q_out == nullptr || a.k_cache == nullptr || a.v_cache == nullptr) {
        return Invalid(absl::StrCat("rope epilogue: head_dim ", a.head_dim,
                                    " must be a multiple of 16 equal to the row group, n = "
                                    "(H_q + 2 H_kv) * head_dim, and every RoPE/KV pointer set"));
      }
      return absl::OkStatus();
    case GemvEpilogue::kSiluMul:
      if (a.act == nullptr || p.group_rows != p.n) {
        return Invalid("silu epilogue needs act and one row group of 2 * intermediate rows");
      }
      return absl::OkStatus();
  }
  return Invalid("unknown epilogue");
}

}  // namespace

absl::Status LaunchGemv(const GemvArgs& a, cudaStream_t stream) {
  PKV_RETURN_IF_ERROR(CheckInput(a));
  PKV_RETURN_IF_ERROR(CheckEpilogue(a));
  if (a.prefetch_steps < 0) return Invalid("prefetch_steps must be >= 0");
  return DispatchDType(a.dtype, [&](auto t) {
    return gemv::DispatchFormat(a.plan.format, [&](auto w) {
      return gemv::LaunchGemvTyped<decltype(t), decltype(w)>(a, stream);
    });
  });
}

absl::StatusOr<GemvDevice> QueryGemvDevice(int device, DType dtype) {
  return QueryGemvDevice(device, dtype, GemvWeightFormat::kDense);
}

absl::StatusOr<GemvDevice> QueryGemvDevice(int device, DType dtype, GemvWeightFormat format) {
  GemvDevice d;
  int smem_per_sm = 0, optin = 0, reserved = 0;
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, device));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  int ctas = 0, static_smem = 0;
  PKV_RETURN_IF_ERROR(DispatchDType(dtype, [&](auto t) {
    return gemv::DispatchFormat(format, [&](auto w) {
      return gemv::GemvCtasPerSm<decltype(t), decltype(w)>(optin, &ctas, &static_smem);
    });
  }));
  d.ctas_per_sm = ctas;
  if (d.num_sms < 1 || d.ctas_per_sm < 1) {
    return absl::InternalError(
        absl::StrCat("gemv: ", d.num_sms, " SMs, ", d.ctas_per_sm, " resident CTAs per SM"));
  }
  // Each resident CTA's share of the SM's shared memory, less what it already holds: staging
  // within it never lowers ctas_per_sm (H200: 228 KB / 3 - 1 KB - ~5 KB = ~70 KB, so 8 tokens
  // of k = 4096 fit). Rounded down to 16-byte words.
  const int share = smem_per_sm / d.ctas_per_sm - reserved - static_smem;
  d.x_stage_max_bytes =
      PKV_GEMV_X_STAGE ? std::max(0, std::min(share, optin - static_smem)) / 16 * 16 : 0;
  return d;
}

absl::StatusOr<bool> PdlUsable(int device) {
  int major = 0;
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return false;
  cudaFuncAttributes attr;
  PKV_CUDA_RETURN_IF_ERROR(cudaFuncGetAttributes(&attr, PdlProbeKernel));
  // The probe shares this library's -gencode list: ptxVersion < 90 means the device runs code
  // JIT-compiled from sm_80 PTX, where PdlWait is empty.
  return attr.ptxVersion >= 90;
}

}  // namespace pkv::gpu
