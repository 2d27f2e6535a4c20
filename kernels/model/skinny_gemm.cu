// The few-token projection kernel (see model_kernels.h): one warp per two weight rows, 16-byte
// streaming loads, fp32 accumulation, warp-shuffle reduction.
#include <cstdint>

#include "kernels/model/model_device.cuh"
#include "kernels/model/model_kernels.h"

namespace pkv::gpu {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerWarp = 2;

__device__ __forceinline__ float2 Pair(uint32_t v, __nv_bfloat16) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
__device__ __forceinline__ float2 Pair(uint32_t v, __half) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// Dot product of 8 elements held as one 16-byte vector each.
template <typename T>
__device__ __forceinline__ float Dot8(const uint4& w, const uint4& x, float acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = Pair(wv[i], T{}), b = Pair(xv[i], T{});
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
  return acc;
}

template <typename T, int kT, bool kF32Out>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) SkinnyGemmKernel(const SkinnyGemmArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = (int64_t{blockIdx.x} * kWarpsPerBlock + warp) * kRowsPerWarp;
  if (n0 >= a.out) return;
  const int64_t kvec = a.in / 8;
  const bool second = n0 + 1 < a.out;
  const uint4* w0 = reinterpret_cast<const uint4*>(a.w) + n0 * kvec;
  const uint4* w1 = second ? w0 + kvec : w0;
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  float acc[kRowsPerWarp][kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) acc[0][t] = acc[1][t] = 0.f;
#pragma unroll 4
  for (int64_t v = lane; v < kvec; v += 32) {
    const uint4 wa = __ldcs(w0 + v), wb = __ldcs(w1 + v);  // read once: do not keep in L2
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      const uint4 xv = __ldg(x + t * kvec + v);
      acc[0][t] = Dot8<T>(wa, xv, acc[0][t]);
      acc[1][t] = Dot8<T>(wb, xv, acc[1][t]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      float v = acc[r][t];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && (r == 0 || second)) {
        const int64_t idx = int64_t{t} * a.out + n0 + r;
        if constexpr (kF32Out) {
          static_cast<float*>(a.y)[idx] = v;
        } else {
          static_cast<T*>(a.y)[idx] = dev::FromF<T>(v);
        }
      }
    }
  }
}

template <typename T, int kT>
absl::Status Launch(const SkinnyGemmArgs& a, cudaStream_t stream) {
  const int64_t warps = (a.out + kRowsPerWarp - 1) / kRowsPerWarp;
  const int blocks = static_cast<int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (a.y_f32) {
    SkinnyGemmKernel<T, kT, true><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(a);
  } else {
    SkinnyGemmKernel<T, kT, false><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(a);
  }
  return CheckLaunch("SkinnyGemmKernel");
}

}  // namespace

bool SkinnyGemmSupported(int64_t num_tokens, int64_t in, const void* x, const void* w) {
  return num_tokens >= 1 && num_tokens <= kSkinnyGemmMaxTokens && in % 8 == 0 &&
         in <= (int64_t{1} << 30) && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

absl::Status LaunchSkinnyGemm(const SkinnyGemmArgs& a, cudaStream_t stream) {
  if (!SkinnyGemmSupported(a.num_tokens, a.in, a.x, a.w) || a.out <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "skinny gemm: ", a.num_tokens, " tokens x in ", a.in, " is not supported (1..",
        kSkinnyGemmMaxTokens, " tokens, in a multiple of 8, 16-byte aligned operands)"));
  }
  return DispatchDType(a.dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    switch (a.num_tokens) {
      case 1:
        return Launch<T, 1>(a, stream);
      case 2:
        return Launch<T, 2>(a, stream);
      case 3:
        return Launch<T, 3>(a, stream);
      default:
        return Launch<T, 4>(a, stream);
    }
  });
}

}  // namespace pkv::gpu
