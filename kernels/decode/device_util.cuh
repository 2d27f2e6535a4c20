// Device helpers of the decode kernels: cp.async (16-byte global -> shared copies with zero fill),
// ldmatrix / movmatrix, the m16n8k16 tensor-core MMA for fp16 and bf16, base-2 exponentials and
// fp32 <-> 16-bit packing. All are sm_80+ instructions, so one code path serves every target.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace pkv::decode::dev {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; when !valid the 16 shared bytes are zero-filled and nothing is read.
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
// Same with an L2 prefetch-size hint (kBytes = 128 or 256): the L2 fetches the whole aligned
// block on a miss, so the DRAM sees fewer, larger requests for the contiguous page runs.
template <int kBytes>
__device__ __forceinline__ void CpAsync16Prefetch(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  if constexpr (kBytes == 256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
  }
}
// base + a * b (a, b 32-bit unsigned) as one IMAD.WIDE.U32 with the 64-bit addend; the compiler
// otherwise shares a * b between bases and adds each base with two 32-bit adds.
__device__ __forceinline__ const uint8_t* MadWide(uint32_t a, uint32_t b, const uint8_t* base) {
  const uint8_t* r;
  asm("mad.wide.u32 %0, %1, %2, %3;\n" : "=l"(r) : "r"(a), "r"(b), "l"(base));
  return r;
}
__device__ __forceinline__ void CpAsync4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kN>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kN) : "memory");
}
// wait_group takes an immediate; the ring depth is a run-time value.
__device__ __forceinline__ void CpAsyncWaitDynamic(int pending) {
  switch (pending) {
    case 0:
      CpAsyncWait<0>();
      break;
    case 1:
      CpAsyncWait<1>();
      break;
    case 2:
      CpAsyncWait<2>();
      break;
    case 3:
      CpAsyncWait<3>();
      break;
    case 4:
      CpAsyncWait<4>();
      break;
    case 5:
      CpAsyncWait<5>();
      break;
    case 6:
      CpAsyncWait<6>();
      break;
    case 7:
      CpAsyncWait<7>();
      break;
    default:  // kMaxStages
      CpAsyncWait<8>();
      break;
  }
}

__device__ __forceinline__ void Ldmatrix4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void Ldmatrix4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// Transposes an 8x8 b16 matrix held in the mma fragment layout (each lane: row lane/4, columns
// 2*(lane%4) and +1) so each lane holds the same positions of the transpose.
__device__ __forceinline__ uint32_t MovTrans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

template <typename T>
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1);
template <>
__device__ __forceinline__ void Mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void Mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x with ex2.approx (2 ulp); 2^-inf = 0.
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float NegInf() { return __int_as_float(0xff800000u); }

// Two floats -> one register of two 16-bit values (x in the low half).
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float x, float y);
template <>
__device__ __forceinline__ uint32_t PackPair<__half>(float x, float y) {
  __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t PackPair<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&h);
}

// Stores 4 floats as 4 elements of T (8 bytes; dst 8-byte aligned).
template <typename T>
__device__ __forceinline__ void Store4(T* dst, float4 v) {
  uint2 u;
  u.x = PackPair<T>(v.x, v.y);
  u.y = PackPair<T>(v.z, v.w);
  *reinterpret_cast<uint2*>(dst) = u;
}

__device__ __forceinline__ float WarpMaxXor4to16(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
  return v;
}
__device__ __forceinline__ float WarpSumXor4to16(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  return v;
}

}  // namespace pkv::decode::dev
