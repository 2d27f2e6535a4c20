// LaunchDequantizeGemvWeights (gemv.h): packed 4-bit / fp8 weights -> dense [n][k] fp16/bf16.
// One thread per (row, unit, lane slot): it expands the 16 bytes a GEMV lane would load with the
// GEMV's own weight policy (gemv_weights.cuh), so both see the same dequantized values, and
// writes the unit's steps as 16-byte runs of 8 k.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/decode/device_util.cuh"
#include "kernels/model/gemv.h"
#include "kernels/model/gemv_weights.cuh"
#include "kernels/model/model_device.cuh"

namespace pkv::gpu {
namespace {

constexpr int kDequantThreads = 256;

template <typename T, typename W>
__global__ void __launch_bounds__(kDequantThreads) DequantizeKernel(const GemvDequantArgs a) {
  const int64_t units = a.k / (kGemvStepK * W::kSteps);
  const int64_t id = int64_t{blockIdx.x} * kDequantThreads + threadIdx.x;
  if (id >= a.n * units * 4) return;
  const int64_t row = id / (units * 4), unit = (id / 4) % units;
  const int c = static_cast<int>(id % 4);
  const uint4 v = __ldcs(static_cast<const uint4*>(a.w) + id);
  uint32_t s = 0;
  float scale = 1.f;
  if constexpr (W::kScaleWords) s = __ldg(static_cast<const uint32_t*>(a.w_scales) + id / 4);
  if constexpr (W::kRowScale) {
    scale = __ldg(static_cast<const float*>(a.w_scales) + (a.w_scale_count == 1 ? 0 : row));
  }
  T* out = static_cast<T*>(a.out) + row * a.k + unit * kGemvStepK * W::kSteps + 8 * c;
#pragma unroll
  for (int u = 0; u < W::kSteps; ++u) {
    uint4 w = W::template Expand<T>(v, s, u);
    if constexpr (W::kRowScale) {  // exact e4m3 in T, times the float scale, rounded once
      uint32_t* words = reinterpret_cast<uint32_t*>(&w);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const T* pair = reinterpret_cast<const T*>(&words[i]);
        words[i] = decode::dev::PackPair<T>(dev::ToF(pair[0]) * scale, dev::ToF(pair[1]) * scale);
      }
    }
    __stcs(reinterpret_cast<uint4*>(out + u * kGemvStepK), w);
  }
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("gemv dequantize: ", what));
}

}  // namespace

absl::Status LaunchDequantizeGemvWeights(const GemvDequantArgs& a, cudaStream_t stream) {
  if (a.format != GemvWeightFormat::kInt4 && a.format != GemvWeightFormat::kFp8) {
    return Invalid("format must be int4 or fp8");
  }
  if (a.n <= 0 || a.k <= 0 || a.k % GemvKMultiple(a.format) != 0) {
    return Invalid(absl::StrCat("shape [", a.n, "][", a.k, "] needs k a positive multiple of ",
                                GemvKMultiple(a.format)));
  }
  if (a.w == nullptr || a.out == nullptr || a.w_scales == nullptr ||
      reinterpret_cast<uintptr_t>(a.w) % 16 != 0 || reinterpret_cast<uintptr_t>(a.out) % 16 != 0) {
    return Invalid("w, w_scales and out must be set, w and out 16-byte aligned");
  }
  if (a.format == GemvWeightFormat::kFp8 && a.w_scale_count != 1 && a.w_scale_count != a.n) {
    return Invalid(absl::StrCat("fp8 needs 1 or n = ", a.n, " scales, got ", a.w_scale_count));
  }
  const int64_t threads = a.n * a.k / (kGemvStepK * GemvUnitSteps(a.format)) * 4;
  const dim3 grid(static_cast<uint32_t>((threads + kDequantThreads - 1) / kDequantThreads));
  return DispatchDType(a.dtype, [&](auto t) {
    using T = decltype(t);
    if (a.format == GemvWeightFormat::kInt4) {
      DequantizeKernel<T, gemv::Int4Weights><<<grid, kDequantThreads, 0, stream>>>(a);
    } else {
      DequantizeKernel<T, gemv::Fp8Weights><<<grid, kDequantThreads, 0, stream>>>(a);
    }
    return CheckLaunch("DequantizeKernel");
  });
}

}  // namespace pkv::gpu
