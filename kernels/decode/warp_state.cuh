// The per-warp online-softmax state of the decode kernel and the one step every tile path (fp16 /
// bf16 pages, FP8 pages) shares: masked scores in, rescaled state and P^T as MMA B operands out.
#pragma once

#include <cstdint>

#include "kernels/decode/device_util.cuh"

namespace pkv::decode::dev {

// O^T fragments (d slot 16*mt + r (+8), heads 2c, 2c+1 where r = lane/4, c = lane%4), running
// max m and per-lane partial sum l of heads 2c and 2c+1. Which head-dim index a d slot holds is
// the tile path's choice (identity for 16-bit pages, FP8Dim for FP8 pages).
template <int kD>
struct WarpState {
  float o[kD / 16][4];
  float m[2];
  float l[2];
};

// acc: S^T fragment of the warp's 16 tokens (tokens r, r + 8; heads 2c, 2c + 1) as fp32 q.k.
// Applies scale_log2, masks tokens >= len, updates the state and returns P^T's two B operands
// (tokens 0-7 and 8-15) in *pb0, *pb1.
template <int kD, typename T>
__device__ __forceinline__ void OnlineSoftmaxStep(WarpState<kD>& st, const float (&acc)[4],
                                                  int first_token, int len, float scale_log2,
                                                  uint32_t* pb0, uint32_t* pb1) {
  const int lane = threadIdx.x & 31, wr = (threadIdx.x >> 5) * 16;
  float s[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) s[j] = acc[j] * scale_log2;
  const int t0 = first_token + wr + (lane >> 2);
  if (t0 >= len) s[0] = s[1] = NegInf();
  if (t0 + 8 >= len) s[2] = s[3] = NegInf();
  float p[4];
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // head 2c + j: scores s[j] (token r) and s[j + 2] (token r + 8)
    const float mx = WarpMaxXor4to16(fmaxf(s[j], s[j + 2]));
    const float m_new = fmaxf(st.m[j], mx);
    const float base = m_new == NegInf() ? 0.f : m_new;  // all masked so far: keep exps at 0
    const float alpha = Exp2(st.m[j] - base);
    p[j] = Exp2(s[j] - base);
    p[j + 2] = Exp2(s[j + 2] - base);
    st.l[j] = st.l[j] * alpha + p[j] + p[j + 2];
    st.m[j] = m_new;
#pragma unroll
    for (int mt = 0; mt < kD / 16; ++mt) {
      st.o[mt][j] *= alpha;
      st.o[mt][j + 2] *= alpha;
    }
  }
  *pb0 = MovTrans(PackPair<T>(p[0], p[1]));  // tokens 0-7 as the B operand
  *pb1 = MovTrans(PackPair<T>(p[2], p[3]));  // tokens 8-15
}

}  // namespace pkv::decode::dev
