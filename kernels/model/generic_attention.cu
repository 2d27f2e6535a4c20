// The generic paged causal attention kernel (any head dim up to 512): one CTA per (token, q head)
// walks the token's keys in chunks of one key per thread, with an online softmax (natural exp)
// and one output dimension per thread and chunk pass. Correct for every shape, fast for none: the
// model backend uses it only where the tensor-core kernels are not compiled (head_dim 16 of the
// tiny test model). FP8 pages (Kv = KvE4M3 / KvE5M2) are decoded per element in software
// (fp8_kv_device.cuh) with the K scale folded into q and the V scale into the output.
#include <cmath>
#include <type_traits>

#include "kernels/model/fp8_kv_device.cuh"
#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {
namespace {

constexpr int kGenericThreads = 128;
constexpr int kMaxDimsPerThread = 4;  // head_dim <= kGenericThreads * 4 = 512

// Kv: the page element (T, or the FP8 tags); KvRow points at one key's row of such elements.
template <typename Kv>
using KvElem = std::conditional_t<decode::dev::kIsFp8Kv<Kv>, uint8_t, Kv>;

template <typename Kv>
__device__ const KvElem<Kv>* KvRow(const GenericAttentionArgs& a, const void* cache, int base,
                                   int key, int kvh) {
  const int64_t page = a.page_ids[base + key / a.page_size];
  const int64_t slot = key % a.page_size;
  return static_cast<const KvElem<Kv>*>(cache) +
         ((page * a.num_kv_heads + kvh) * a.page_size + slot) * a.head_dim;
}

// The stored value without the FP8 scale.
template <typename Kv>
__device__ __forceinline__ float KvValue(KvElem<Kv> x) {
  if constexpr (decode::dev::kIsFp8Kv<Kv>) {
    return dev::DecodeFp8<Kv>(x);
  } else {
    return dev::ToF(x);
  }
}

template <typename T, typename Kv>
__global__ void __launch_bounds__(kGenericThreads)
    GenericAttentionKernel(const GenericAttentionArgs a) {
  extern __shared__ float smem[];  // q [head_dim] (pre-scaled), p [kGenericThreads]
  __shared__ float scratch[kGenericThreads / 32];
  float* qs = smem;
  float* ps = smem + a.head_dim;
  const int t = blockIdx.x, h = blockIdx.y, d = a.head_dim, tid = threadIdx.x;
  T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(t) * a.num_q_heads + h) * d;
  const int base = a.page_base[t];
  if (base < 0) {  // graph padding
    for (int i = tid; i < d; i += blockDim.x) out[i] = dev::FromF<T>(0.f);
    return;
  }
  const int pos = a.positions[t];
  const int kvh = h / (a.num_q_heads / a.num_kv_heads);
  const T* q = static_cast<const T*>(a.q) + (static_cast<int64_t>(t) * a.num_q_heads + h) * d;
  // FP8: Fp8ToFloat(code) * k_scale dotted with q == code values dotted with q * k_scale.
  const bool fp8 = decode::dev::kIsFp8Kv<Kv>;
  const float q_scale = a.scale * (fp8 ? a.kv_scales.k : 1.f);
  const float v_scale = fp8 ? a.kv_scales.v : 1.f;
  for (int i = tid; i < d; i += blockDim.x) qs[i] = dev::ToF(q[i]) * q_scale;
  __syncthreads();

  float m = -INFINITY, l = 0.f;
  float acc[kMaxDimsPerThread] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 <= pos; k0 += kGenericThreads) {
    const int k = k0 + tid;
    float s = -INFINITY;
    if (k <= pos) {
      const KvElem<Kv>* kr = KvRow<Kv>(a, a.k_cache, base, k, kvh);
      s = 0.f;
      for (int i = 0; i < d; ++i) s += qs[i] * KvValue<Kv>(kr[i]);
    }
    const float m_new = fmaxf(m, dev::BlockMax(s, scratch));  // finite: key k0 <= pos is valid
    const float alpha = expf(m - m_new);
    const float p = k <= pos ? expf(s - m_new) : 0.f;
    ps[tid] = p;
    l = l * alpha + dev::BlockSum(p, scratch);  // its barriers also publish ps
    const int n = min(kGenericThreads, pos + 1 - k0);
#pragma unroll
    for (int j = 0; j < kMaxDimsPerThread; ++j) acc[j] *= alpha;
    for (int kk = 0; kk < n; ++kk) {
      const KvElem<Kv>* vr = KvRow<Kv>(a, a.v_cache, base, k0 + kk, kvh);
      const float pk = ps[kk];
#pragma unroll
      for (int j = 0; j < kMaxDimsPerThread; ++j) {
        const int dd = tid + j * kGenericThreads;
        if (dd < d) acc[j] += pk * KvValue<Kv>(vr[dd]);
      }
    }
    m = m_new;
    __syncthreads();  // ps is rewritten by the next chunk
  }
#pragma unroll
  for (int j = 0; j < kMaxDimsPerThread; ++j) {
    const int dd = tid + j * kGenericThreads;
    if (dd < d) out[dd] = dev::FromF<T>(acc[j] / l * v_scale);
  }
}

}  // namespace

absl::Status LaunchGenericAttention(const GenericAttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim <= 0 || a.head_dim > kGenericThreads * kMaxDimsPerThread) {
    return absl::InvalidArgumentError(absl::StrCat("generic attention: head_dim ", a.head_dim,
                                                   " is not in [1, ",
                                                   kGenericThreads * kMaxDimsPerThread, "]"));
  }
  if (a.num_kv_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0) {
    return absl::InvalidArgumentError("generic attention: H_q must be a multiple of H_kv");
  }
  if (a.num_tokens <= 0) return absl::OkStatus();
  const size_t smem = (a.head_dim + kGenericThreads) * sizeof(float);
  return DispatchDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    return dev::DispatchKvElem<T>(a.kv_dtype, [&](auto kv_tag) {
      GenericAttentionKernel<T, decltype(kv_tag)>
          <<<dim3(a.num_tokens, a.num_q_heads), kGenericThreads, smem, stream>>>(a);
      return CheckLaunch("GenericAttentionKernel");
    });
  });
}

}  // namespace pkv::gpu
