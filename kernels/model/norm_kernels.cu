// Embedding + RMSNorm and residual-add + RMSNorm: one CTA per token row. The row's float32 values
// are staged in shared memory between the sum-of-squares pass and the scaling pass, so each input
// is read from memory once.
#include <algorithm>

#include "kernels/common/pdl.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {
namespace {

constexpr int kNormThreads = 256;
// Residual add + norm runs once or twice a layer at every batch size: one CTA per token leaves
// most SMs idle at decode batch sizes, so each CTA gets up to 1024 threads (about 4 elements a
// thread) to keep more loads in flight (14.5 us at B = 64, hidden 4096, with 256 threads).
constexpr int kAddNormMaxThreads = 1024;
constexpr int kMaxHidden = 12288;  // 48 KB of float staging: the default shared-memory limit

template <typename T>
__device__ void NormRowFromSmem(const float* v, int hidden, float sum_sq, const float* w, float eps,
                                T* out) {
  const float inv = rsqrtf(sum_sq / static_cast<float>(hidden) + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = dev::FromF<T>(v[i] * inv * w[i]);
}

template <typename T>
__global__ void __launch_bounds__(kNormThreads) EmbedRmsNormKernel(const EmbedNormArgs a) {
  extern __shared__ float row[];  // [hidden]
  __shared__ float scratch[kNormThreads / 32];
  const int t = blockIdx.x;
  int32_t id = a.token_ids[t];
  if (id < 0) id = a.feedback_ids != nullptr ? a.feedback_ids[(-1 - id) * a.feedback_stride] : 0;
  if (id < 0) id = 0;  // a failed sample (-1): its step reports the error, this row's is dropped
  const T* src = static_cast<const T*>(a.embed) + static_cast<int64_t>(id) * a.hidden;
  float* x = a.x + static_cast<int64_t>(t) * a.hidden;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    const float v = dev::ToF(src[i]);
    row[i] = v;
    x[i] = v;
    sum_sq += v * v;
  }
  sum_sq = dev::BlockSum(sum_sq, scratch);
  if (a.sum_sq != nullptr && threadIdx.x == 0) a.sum_sq[t] = sum_sq;
  NormRowFromSmem<T>(row, a.hidden, sum_sq, a.norm_weight, a.eps,
                     static_cast<T*>(a.xn) + static_cast<int64_t>(t) * a.hidden);
}

template <typename T>
__global__ void __launch_bounds__(kAddNormMaxThreads) AddRmsNormKernel(const AddNormArgs a) {
  extern __shared__ float row[];  // [hidden]
  __shared__ float scratch[kAddNormMaxThreads / 32];
  PdlWait();  // x and delta come from earlier kernels
  PdlTrigger();
  const int r = blockIdx.x;
  const int64_t t = a.rows != nullptr ? a.rows[r] : r;
  float* x = a.x + t * a.hidden;
  const T* d = a.delta != nullptr ? static_cast<const T*>(a.delta) + t * a.hidden : nullptr;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    float v = d != nullptr ? x[i] + dev::ToF(d[i]) : x[i];
    if (a.bias != nullptr) v += a.bias[i];
    row[i] = v;
    if (a.write_x) x[i] = v;
    sum_sq += v * v;
  }
  sum_sq = dev::BlockSum(sum_sq, scratch);
  NormRowFromSmem<T>(row, a.hidden, sum_sq, a.norm_weight, a.eps,
                     static_cast<T*>(a.xn) + static_cast<int64_t>(r) * a.hidden);
}

absl::Status CheckHidden(int32_t hidden) {
  if (hidden <= 0 || hidden > kMaxHidden) {
    return absl::InvalidArgumentError(
        absl::StrCat("rms norm: hidden size ", hidden, " is not in [1, ", kMaxHidden, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchEmbedRmsNorm(const EmbedNormArgs& a, cudaStream_t stream) {
  PKV_RETURN_IF_ERROR(CheckHidden(a.hidden));
  if (a.num_tokens <= 0) return absl::OkStatus();
  return DispatchDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    EmbedRmsNormKernel<T><<<a.num_tokens, kNormThreads, a.hidden * sizeof(float), stream>>>(a);
    return CheckLaunch("EmbedRmsNormKernel");
  });
}

absl::Status LaunchAddRmsNorm(const AddNormArgs& a, cudaStream_t stream) {
  PKV_RETURN_IF_ERROR(CheckHidden(a.hidden));
  if (a.num_out <= 0) return absl::OkStatus();
  return DispatchDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int threads = std::clamp((a.hidden / 4 + 31) / 32 * 32, kNormThreads, kAddNormMaxThreads);
    return CudaStatus(LaunchMaybePdl(AddRmsNormKernel<T>, dim3(a.num_out), dim3(threads),
                                     a.hidden * sizeof(float), stream, a.pdl, a),
                      "AddRmsNormKernel");
  });
}

}  // namespace pkv::gpu
