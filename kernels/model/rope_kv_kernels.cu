// q/k/v post-processing fused with the K/V page write: a CTA per (token, group of kRopeWarps
// heads), one warp per head. Each CTA builds the token's RoPE table (cos, sin of position *
// inv_freq[i], computed in double) in shared memory for its heads. Spreading a token's heads over
// CTAs matters at decode batch sizes: with one CTA per token, a warp walked 12 heads of an 8B
// layer one after another, each a dependent round trip to memory (18 us at B = 64 on an H200).
#include <cmath>

#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"
#include "kernels/model/pdl.cuh"

namespace pkv::gpu {
namespace {

constexpr int kRopeWarps = 8;
constexpr int kRopeThreads = 32 * kRopeWarps;
constexpr int kMaxHeadDim = 512;

template <typename T>
__global__ void __launch_bounds__(kRopeThreads) QkvRopeKvWriteKernel(const QkvRopeArgs a) {
  __shared__ float cos_t[kMaxHeadDim / 2];
  __shared__ float sin_t[kMaxHeadDim / 2];
  PdlWait();  // qkv comes from the previous kernel
  PdlTrigger();
  const int t = blockIdx.x;
  const int d = a.head_dim, half = d / 2;
  const int64_t pos = a.positions[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(static_cast<double>(pos) * a.inv_freq[i], &s, &c);
    cos_t[i] = static_cast<float>(c);
    sin_t[i] = static_cast<float>(s);
  }
  __syncthreads();

  const int hq = a.num_q_heads, hkv = a.num_kv_heads;
  const int64_t stride = static_cast<int64_t>(hq + 2 * hkv) * d;
  const int32_t slot = a.kv_slots[t];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y * kRopeWarps + warp;  // this warp's head
  if (h < hq + 2 * hkv) {
    const float* src = a.qkv + t * stride + static_cast<int64_t>(h) * d;
    const float* bias = a.bias != nullptr ? a.bias + static_cast<int64_t>(h) * d : nullptr;
    const bool is_q = h < hq, is_k = !is_q && h < hq + hkv;
    const float* norm_w = is_q ? a.q_norm : (is_k ? a.k_norm : nullptr);
    float inv = 1.f;
    if (norm_w != nullptr) {
      float ss = 0.f;
      for (int i = lane; i < d; i += 32) {
        const float v = src[i] + (bias ? bias[i] : 0.f);
        ss += v * v;
      }
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      inv = rsqrtf(ss / static_cast<float>(d) + a.eps);
    }
    auto value = [&](int i) {
      float v = src[i] + (bias ? bias[i] : 0.f);
      return norm_w != nullptr ? v * inv * norm_w[i] : v;
    };
    T* dst;
    if (is_q) {
      dst = static_cast<T*>(a.q_out) + (static_cast<int64_t>(t) * hq + h) * d;
    } else {
      if (slot < 0) return;  // graph padding: no KV slot
      const int kvh = is_k ? h - hq : h - hq - hkv;
      const int64_t page = slot / a.page_size, off = slot % a.page_size;
      T* cache = static_cast<T*>(is_k ? a.k_cache : a.v_cache);
      dst = cache + ((page * hkv + kvh) * a.page_size + off) * d;
    }
    if (is_q || is_k) {
      for (int i = lane; i < half; i += 32) {
        const float x1 = value(i), x2 = value(i + half);
        dst[i] = dev::FromF<T>(x1 * cos_t[i] - x2 * sin_t[i]);
        dst[i + half] = dev::FromF<T>(x2 * cos_t[i] + x1 * sin_t[i]);
      }
    } else {
      for (int i = lane; i < d; i += 32) dst[i] = dev::FromF<T>(value(i));
    }
  }
}

}  // namespace

absl::Status LaunchQkvRopeKvWrite(const QkvRopeArgs& a, cudaStream_t stream) {
  if (a.head_dim <= 0 || a.head_dim % 2 != 0 || a.head_dim > kMaxHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope: head_dim ", a.head_dim, " must be even and at most ", kMaxHeadDim));
  }
  if ((a.q_norm == nullptr) != (a.k_norm == nullptr)) {
    return absl::InvalidArgumentError("rope: q_norm and k_norm must be given together");
  }
  if (a.num_tokens <= 0) return absl::OkStatus();
  return DispatchDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int head_groups = (a.num_q_heads + 2 * a.num_kv_heads + kRopeWarps - 1) / kRopeWarps;
    return CudaStatus(LaunchMaybePdl(QkvRopeKvWriteKernel<T>, dim3(a.num_tokens, head_groups),
                                     dim3(kRopeThreads), 0, stream, a.pdl, a),
                      "QkvRopeKvWriteKernel");
  });
}

}  // namespace pkv::gpu
