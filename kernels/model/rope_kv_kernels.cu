// q/k/v post-processing fused with the K/V page write: a CTA per (token, group of kRopeWarps
// heads), one warp per head. Each CTA builds the token's RoPE table (cos, sin of position *
// inv_freq[i], computed in double) in shared memory for its heads. Spreading a token's heads over
// CTAs matters at decode batch sizes: with one CTA per token, a warp walked 12 heads of an 8B
// layer one after another, each a dependent round trip to memory (18 us at B = 64 on an H200).
#include <cmath>

#include "kernels/common/pdl.cuh"
#include "kernels/model/fp8_kv_device.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {
namespace {

constexpr int kRopeWarps = 8;
constexpr int kRopeThreads = 32 * kRopeWarps;
constexpr int kMaxHeadDim = 512;

// Element `i` of a K or V page: the 16-bit value, or (FP8 pages, Kv = KvE4M3 / KvE5M2) the code
// of x * inv_scale, as QuantizeFp8 (kernels/attention/fp8_kv.h) computes it.
template <typename T, typename Kv>
__device__ __forceinline__ void StoreKv(void* cache, int64_t i, float x, float inv_scale) {
  if constexpr (decode::dev::kIsFp8Kv<Kv>) {
    static_cast<uint8_t*>(cache)[i] = dev::EncodeFp8<Kv>(x * inv_scale);
  } else {
    static_cast<T*>(cache)[i] = dev::FromF<T>(x);
  }
}

// Kv: T for 16-bit pages, KvE4M3 / KvE5M2 for FP8 pages. inv_*_scale: 1 / the layer's scale,
// computed on the host as QuantizeFp8 does (a reciprocal there, so the product here is the same).
template <typename T, typename Kv>
__global__ void __launch_bounds__(kRopeThreads)
    QkvRopeKvWriteKernel(const QkvRopeArgs a, float inv_k_scale, float inv_v_scale) {
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
    if (is_q) {
      T* dst = static_cast<T*>(a.q_out) + (static_cast<int64_t>(t) * hq + h) * d;
      for (int i = lane; i < half; i += 32) {
        const float x1 = value(i), x2 = value(i + half);
        dst[i] = dev::FromF<T>(x1 * cos_t[i] - x2 * sin_t[i]);
        dst[i + half] = dev::FromF<T>(x2 * cos_t[i] + x1 * sin_t[i]);
      }
      return;
    }
    if (slot < 0) return;  // graph padding: no KV slot
    const int kvh = is_k ? h - hq : h - hq - hkv;
    const int64_t page = slot / a.page_size, off = slot % a.page_size;
    const int64_t row = ((page * hkv + kvh) * a.page_size + off) * d;  // element index
    void* cache = is_k ? a.k_cache : a.v_cache;
    const float inv_scale = is_k ? inv_k_scale : inv_v_scale;
    if (is_k) {
      for (int i = lane; i < half; i += 32) {
        const float x1 = value(i), x2 = value(i + half);
        StoreKv<T, Kv>(cache, row + i, x1 * cos_t[i] - x2 * sin_t[i], inv_scale);
        StoreKv<T, Kv>(cache, row + i + half, x2 * cos_t[i] + x1 * sin_t[i], inv_scale);
      }
    } else {
      for (int i = lane; i < d; i += 32) StoreKv<T, Kv>(cache, row + i, value(i), inv_scale);
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
  if (IsFp8(a.kv_dtype) && !(a.kv_scales.k > 0.f && a.kv_scales.v > 0.f)) {
    return absl::InvalidArgumentError(absl::StrCat("rope: FP8 KV scales k=", a.kv_scales.k,
                                                   " v=", a.kv_scales.v, " must be positive"));
  }
  if (a.num_tokens <= 0) return absl::OkStatus();
  const float inv_k = IsFp8(a.kv_dtype) ? 1.0f / a.kv_scales.k : 1.0f;
  const float inv_v = IsFp8(a.kv_dtype) ? 1.0f / a.kv_scales.v : 1.0f;
  return DispatchDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    return dev::DispatchKvElem<T>(a.kv_dtype, [&](auto kv_tag) {
      using Kv = decltype(kv_tag);
      const int head_groups = (a.num_q_heads + 2 * a.num_kv_heads + kRopeWarps - 1) / kRopeWarps;
      return CudaStatus(LaunchMaybePdl(QkvRopeKvWriteKernel<T, Kv>, dim3(a.num_tokens, head_groups),
                                       dim3(kRopeThreads), 0, stream, a.pdl, a, inv_k, inv_v),
                        "QkvRopeKvWriteKernel");
    });
  });
}

}  // namespace pkv::gpu
