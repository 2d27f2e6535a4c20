// The prefill-attention kernel template (see prefill_launch.h). Included only by the per-head-dim
// instantiation files.
//
// Per CTA: tile = PrefillTile, q head h (blockIdx.x), kv head h / group.
// Shared memory (T elements, XOR-swizzled in 16-byte chunks: chunk c of row r sits at chunk
// c ^ (r % 8), so the 8 rows one ldmatrix phase reads hit 8 different bank groups):
//   Q [kBlockM][D]   K [2][kBlockN][D]   V [2][kBlockN][D]
// Per warp (16 query rows), registers: Q fragments [D/16][4], S [kBlockN/8][4], O [D/8][4] fp32,
// row max m and partial row sum l for rows g and g + 8 (g = lane / 4) in log2 units.
// Masking: key k is visible to query row r iff k <= start_pos + m_begin + r; rows past the
// tile's queries compute garbage that is never stored. Key 0 is visible to every row, so the
// running max is finite after the first key tile (no -inf - -inf).
// FP8 pages (Kv = KvE4M3 / KvE5M2): the K/V tiles are read from global memory into registers
// (8 codes = 8 bytes a chunk) at the top of an iteration, converted to T pairs in registers
// (fp8_convert.cuh: cvt.f16x2.e4m3x2 on sm_89+, bit moves below) and stored into the same
// swizzled 16-bit tiles after the iteration's MMAs, so the loads' latency overlaps the math as
// cp.async's does and the ldmatrix / MMA code is the 16-bit path's. The K scale (and the 2^8 of
// sm_80/86 E4M3 conversions) is folded into the softmax scale, the V scale into the output.
// Split tiles (kSplit, prefill_split_plan.h): the CTA reads keys [k C, (k + 1) C) of its
// queries from a fresh online-softmax state, and each query that sees a key of the split leaves its
// state (O unnormalized, m, l) in its partial slot; the merge kernel (PrefillSplitMergeKernel)
// folds a query's slots in split order into its output. Split tiles also pack a KV head's G query
// heads into the tile's rows (row r: query r / G, q head kv_head G + r % G; one CTA a (tile, KV
// head)), so each K/V tile is read once for the G heads instead of once per head. A row's
// arithmetic (its S row, max, sum and O row) never involves another row of the tile, so a (query,
// head)'s partials are the same bits wherever it sits: a one-query tile or a full one, any row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/decode/device_util.cuh"
#include "kernels/decode/fp8_convert.cuh"
#include "kernels/prefill/prefill_plan.h"
#include "kernels/prefill/prefill_split_plan.h"

namespace pkv::prefill::dev {

using decode::dev::CpAsync16;
using decode::dev::CpAsyncCommit;
using decode::dev::CpAsyncWait;
using decode::dev::Exp2;
using decode::dev::Fp8Unit;
using decode::dev::Fp8x2To;
using decode::dev::kIsFp8Kv;
using decode::dev::Ldmatrix4;
using decode::dev::Ldmatrix4Trans;
using decode::dev::Mma16816;
using decode::dev::PackPair;
using decode::dev::SmemAddr;

constexpr int kBlockM = kPrefillBlockM;
constexpr int kBlockN = kPrefillBlockN;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
static_assert(kBlockM == kWarps * 16, "each warp owns 16 query rows");

struct PrefillParams {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  const int32_t* page_ids;
  const PrefillTile* tiles;
  void* out;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t group;
  int32_t page_size;
  float scale_log2;  // softmax scale * log2(e)
  float k_scale;     // FP8 pages: the layer's dequantization scales (fp8_kv.h); 16-bit: 1
  float v_scale;
  // Split tiles: partial slots [token][q head][max_splits] of O (kD floats) and (m, l).
  float* part_o;
  float* part_ml;
  int32_t max_splits;
  int32_t part_token_base;  // the token of slot row 0 (a window's first token)
};

template <int kD>
constexpr int SmemElems() {
  return (kBlockM + 4 * kBlockN) * kD;
}

// Element offset of 16-byte chunk c of row r in a swizzled [rows][kD] tile.
template <int kD>
__device__ __forceinline__ int Swz(int r, int c) {
  return r * kD + ((c ^ (r & 7)) << 3);
}

// Issues the cp.async copies of keys [n0, n0 + kBlockN) of K and V into one stage; keys at or past
// kv_end are zero-filled (never read from memory).
template <typename T, int kD>
__device__ __forceinline__ void LoadKvTile(const PrefillParams& p, const PrefillTile& tile, int kvh,
                                           int n0, int kv_end, T* sk, T* sv) {
  constexpr int kChunks = kD / 8;
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
#pragma unroll
  for (int i = threadIdx.x; i < kBlockN * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int key = n0 + r;
    const bool valid = key < kv_end;
    int64_t off = 0;
    if (valid) {
      const int64_t page = p.page_ids[tile.page_base + key / p.page_size];
      const int slot = key % p.page_size;
      off = ((page * p.num_kv_heads + kvh) * p.page_size + slot) * kD + c * 8;
    }
    CpAsync16(SmemAddr(sk + Swz<kD>(r, c)), kc + off, valid);
    CpAsync16(SmemAddr(sv + Swz<kD>(r, c)), vc + off, valid);
  }
}

// One stage's FP8 K and V chunks held in registers between the global load and the shared store.
template <int kD>
struct Fp8KvRegs {
  static constexpr int kPerThread = kBlockN * (kD / 8) / kThreads;
  static_assert(kBlockN * (kD / 8) % kThreads == 0, "chunks divide evenly over the CTA");
  uint2 k[kPerThread];
  uint2 v[kPerThread];
};

// Reads keys [n0, n0 + kBlockN) of K and V as 8-code chunks (chunk c of row r: head dims
// 8c..8c+7, the 16-bit tile's chunk); keys at or past kv_end read as zero codes.
template <int kD>
__device__ __forceinline__ void LoadKvFp8(const PrefillParams& p, const PrefillTile& tile, int kvh,
                                          int n0, int kv_end, Fp8KvRegs<kD>& regs) {
  constexpr int kChunks = kD / 8;
  const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache);
  const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache);
#pragma unroll
  for (int j = 0; j < Fp8KvRegs<kD>::kPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / kChunks, c = i % kChunks;
    const int key = n0 + r;
    regs.k[j] = regs.v[j] = make_uint2(0u, 0u);
    if (key < kv_end) {
      const int64_t page = p.page_ids[tile.page_base + key / p.page_size];
      const int slot = key % p.page_size;
      const int64_t off = ((page * p.num_kv_heads + kvh) * p.page_size + slot) * kD + c * 8;
      regs.k[j] = *reinterpret_cast<const uint2*>(kc + off);
      regs.v[j] = *reinterpret_cast<const uint2*>(vc + off);
    }
  }
}

// Converts the chunks to T and stores them where LoadKvTile's cp.async would have put them.
template <typename T, int kD, typename Kv>
__device__ __forceinline__ void StoreKvFp8(const Fp8KvRegs<kD>& regs, T* sk, T* sv) {
  constexpr int kChunks = kD / 8;
  auto widen = [](uint2 w) {
    return make_uint4(Fp8x2To<Kv, T>(w.x), Fp8x2To<Kv, T>(w.x >> 16), Fp8x2To<Kv, T>(w.y),
                      Fp8x2To<Kv, T>(w.y >> 16));
  };
#pragma unroll
  for (int j = 0; j < Fp8KvRegs<kD>::kPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / kChunks, c = i % kChunks;
    *reinterpret_cast<uint4*>(sk + Swz<kD>(r, c)) = widen(regs.k[j]);
    *reinterpret_cast<uint4*>(sv + Swz<kD>(r, c)) = widen(regs.v[j]);
  }
}

// The tile's Q rows: row r is query r / group with q head first_head * group + r % group (split
// tiles pack a KV head's q heads: first_head = the KV head, group = H_q / H_kv; whole tiles hold
// one q head: first_head = h, group 1). Rows from `rows` on are zero-filled.
template <typename T, int kD>
__device__ __forceinline__ void LoadQTile(const PrefillParams& p, const PrefillTile& tile,
                                          int first_head, int group, int rows, T* sq) {
  constexpr int kChunks = kD / 8;
  const T* q = static_cast<const T*>(p.q);
#pragma unroll
  for (int i = threadIdx.x; i < kBlockM * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = r < rows;
    const int qi = r / group;
    const int64_t token = int64_t{tile.q_begin} + tile.m_begin + qi;
    const int h = first_head * group + (r - qi * group);
    const T* src = valid ? q + (token * p.num_q_heads + h) * kD + c * 8 : q;
    CpAsync16(SmemAddr(sq + Swz<kD>(r, c)), src, valid);
  }
}

// S = Q K^T for this warp's 16 rows and the stage's kBlockN keys.
template <typename T, int kD>
__device__ __forceinline__ void QkTile(const uint32_t (&qf)[kD / 16][4], const T* sk,
                                       float (&s)[kBlockN / 8][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < kBlockN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
    for (int n = 0; n < kBlockN / 8; n += 2) {
      // Matrices: (keys n*8.., chunk 2kk), (n*8.., 2kk+1), (n*8+8.., 2kk), (n*8+8.., 2kk+1).
      const int key = n * 8 + (lane & 7) + ((lane >> 4) << 3);
      const int chunk = kk * 2 + ((lane >> 3) & 1);
      uint32_t b[4];
      Ldmatrix4(b, SmemAddr(sk + Swz<kD>(key, chunk)));
      Mma16816<T>(s[n], qf[kk], b[0], b[1]);
      Mma16816<T>(s[n + 1], qf[kk], b[2], b[3]);
    }
  }
}

// O += P V with P taken from the S accumulators (the C layout of two n8 tiles is the A layout of
// one k16 chunk).
template <typename T, int kD>
__device__ __forceinline__ void PvTile(const float (&s)[kBlockN / 8][4], const T* sv,
                                       float (&o)[kD / 8][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kc = 0; kc < kBlockN / 16; ++kc) {
    uint32_t a[4];
    a[0] = PackPair<T>(s[2 * kc][0], s[2 * kc][1]);
    a[1] = PackPair<T>(s[2 * kc][2], s[2 * kc][3]);
    a[2] = PackPair<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]);
    a[3] = PackPair<T>(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
    for (int dn = 0; dn < kD / 8; dn += 2) {
      // Matrices (transposed): (keys kc*16.., chunk dn), (kc*16+8.., dn), (kc*16.., dn+1),
      // (kc*16+8.., dn+1).
      const int key = kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      const int chunk = dn + (lane >> 4);
      uint32_t b[4];
      Ldmatrix4Trans(b, SmemAddr(sv + Swz<kD>(key, chunk)));
      Mma16816<T>(o[dn], a, b[0], b[1]);
      Mma16816<T>(o[dn + 1], a, b[2], b[3]);
    }
  }
}

// Scales S to log2 units, masks invisible keys, updates the running max / sum and rescales O;
// leaves P = 2^(S - m) in s. kPacked: rows g and g + 8 are at positions row_pos[0] and [1] (packed
// split tiles); else at q_pos_row0 + g and + 8.
template <int kD, bool kPacked = false>
__device__ __forceinline__ void OnlineSoftmax(float (&s)[kBlockN / 8][4], float (&o)[kD / 8][4],
                                              float (&m)[2], float (&l)[2], float scale_log2,
                                              bool mask, int n0, int q_pos_row0, int kv_end,
                                              const int (&row_pos)[2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < kBlockN / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = s[n][e] * scale_log2;
      if (mask) {
        const int key = n0 + n * 8 + 2 * (lane & 3) + (e & 1);
        const int qpos = kPacked ? row_pos[e >> 1] : q_pos_row0 + (lane >> 2) + (e >> 1) * 8;
        if (key > qpos || key >= kv_end) v = -INFINITY;
      }
      s[n][e] = v;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows g and g + 8
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[h], mx);
    const float alpha = Exp2(m[h] - m_new);  // m[h] = -inf on the first tile: alpha = 0
    m[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) {
      s[n][2 * h] = Exp2(s[n][2 * h] - m_new);
      s[n][2 * h + 1] = Exp2(s[n][2 * h + 1] - m_new);
      sum += s[n][2 * h] + s[n][2 * h + 1];
    }
    l[h] = l[h] * alpha + sum;  // this lane's partial sum; the quad is summed at the end
#pragma unroll
    for (int dn = 0; dn < kD / 8; ++dn) {
      o[dn][2 * h] *= alpha;
      o[dn][2 * h + 1] *= alpha;
    }
  }
}

// A row's sum over the 4 lanes of its quad (each holds the partial sum of its columns).
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// out_scale: the V dequantization scale (1 for 16-bit pages).
template <typename T, int kD>
__device__ __forceinline__ void StoreOutput(const PrefillParams& p, const PrefillTile& tile, int h,
                                            int m_rows, float (&o)[kD / 8][4], float (&l)[2],
                                            float out_scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float sum = QuadSum(l[hh]);
    const float inv = out_scale / sum;
    const int r = warp * 16 + (lane >> 2) + hh * 8;
    if (r >= m_rows) continue;
    const int64_t token = int64_t{tile.q_begin} + tile.m_begin + r;
    T* dst = static_cast<T*>(p.out) + (token * p.num_q_heads + h) * kD + 2 * (lane & 3);
#pragma unroll
    for (int dn = 0; dn < kD / 8; ++dn) {
      *reinterpret_cast<uint32_t*>(dst + dn * 8) =
          PackPair<T>(o[dn][2 * hh] * inv, o[dn][2 * hh + 1] * inv);
    }
  }
}

// Split tiles: each query row that saw a key of the split (position >= key0) leaves its state in
// its slot: O unnormalized (kScaled: times out_scale, the FP8 V scale, which the host cannot
// compute: Fp8Unit is per architecture), m (log2 units) and l summed over the quad as
// StoreOutput sums it.
template <int kD, bool kScaled>
__device__ __forceinline__ void StorePartial(const PrefillParams& p, const PrefillTile& tile,
                                             int kvh, int rows, int key0,
                                             const float (&o)[kD / 8][4], const float (&m)[2],
                                             const float (&l)[2], float out_scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const float sum = QuadSum(l[hh]);
    const int r = warp * 16 + (lane >> 2) + hh * 8;
    const int qi = r / p.group;  // packed rows
    if (r >= rows || tile.start_pos + tile.m_begin + qi < key0) continue;
    const int64_t token = int64_t{tile.q_begin} + tile.m_begin + qi;
    const int h = kvh * p.group + (r - qi * p.group);
    const int64_t slot =
        ((token - p.part_token_base) * p.num_q_heads + h) * p.max_splits + tile.split;
    float* dst = p.part_o + slot * kD + 2 * (lane & 3);
#pragma unroll
    for (int dn = 0; dn < kD / 8; ++dn) {
      float2 v = make_float2(o[dn][2 * hh], o[dn][2 * hh + 1]);
      if constexpr (kScaled) v = make_float2(v.x * out_scale, v.y * out_scale);
      *reinterpret_cast<float2*>(dst + dn * 8) = v;
    }
    if ((lane & 3) == 0) *reinterpret_cast<float2*>(p.part_ml + 2 * slot) = make_float2(m[hh], sum);
  }
}

// Kv: T for 16-bit pages, KvE4M3 / KvE5M2 for FP8 pages. kSplit: the tiles are split tiles, with
// packed rows: blockIdx.x is the KV head (else the q head).
template <typename T, int kD, typename Kv = T, bool kSplit = false>
__global__ void __launch_bounds__(kThreads) PrefillAttentionKernel(const PrefillParams p) {
  constexpr bool kFp8 = kIsFp8Kv<Kv>;
  extern __shared__ __align__(128) uint8_t smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* sk = sq + kBlockM * kD;      // [2][kBlockN][kD]
  T* sv = sk + 2 * kBlockN * kD;  // [2][kBlockN][kD]
  const PrefillTile tile = p.tiles[blockIdx.y];
  const int h = blockIdx.x;
  const int kvh = kSplit ? h : h / p.group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m_rows = kSplit ? tile.m_rows : min(kBlockM, tile.num_tokens - tile.m_begin);
  if constexpr (kSplit) {
    if (m_rows <= 0) return;  // an empty slot of a fixed layout (PlanSplitDecodeSlots)
  }
  const int q_pos0 = tile.start_pos + tile.m_begin;  // position of the tile's first query
  // Keys [key0, kv_end) are visible to some row: from 0 to the last query, or a split's part of
  // that (key0 = k C, a multiple of kBlockN, below the last query's position: planner).
  const int key0 = kSplit ? tile.split * tile.split_tokens : 0;
  const int kv_end = kSplit ? min(q_pos0 + m_rows, key0 + tile.split_tokens) : q_pos0 + m_rows;
  const int n_first = key0 / kBlockN;
  const int num_n_tiles = (kv_end + kBlockN - 1) / kBlockN;
  float scale_log2 = p.scale_log2, out_scale = 1.f;
  if constexpr (kFp8) {
    scale_log2 *= p.k_scale * Fp8Unit<Kv>();
    out_scale = p.v_scale * Fp8Unit<Kv>();
  }

  if constexpr (kSplit) {
    LoadQTile<T, kD>(p, tile, kvh, p.group, m_rows * p.group, sq);
  } else {
    LoadQTile<T, kD>(p, tile, h, 1, m_rows, sq);
  }
  if constexpr (kFp8) {
    Fp8KvRegs<kD> first;
    LoadKvFp8<kD>(p, tile, kvh, key0, kv_end, first);
    StoreKvFp8<T, kD, Kv>(first, sk, sv);  // published by the first iteration's barrier
  } else {
    LoadKvTile<T, kD>(p, tile, kvh, key0, kv_end, sk, sv);
  }
  CpAsyncCommit();

  uint32_t qf[kD / 16][4];
  float o[kD / 8][4];
#pragma unroll
  for (int dn = 0; dn < kD / 8; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  // Position of this warp's first row, and (packed split tiles) of the thread's rows g, g + 8.
  const int q_pos_row0 = q_pos0 + (kSplit ? warp * 16 / p.group : warp * 16);
  int row_pos[2] = {0, 0};
  if constexpr (kSplit) {
    row_pos[0] = q_pos0 + (warp * 16 + (lane >> 2)) / p.group;
    row_pos[1] = q_pos0 + (warp * 16 + (lane >> 2) + 8) / p.group;
  }

  for (int j = n_first; j < num_n_tiles; ++j) {
    const int stage = (j - n_first) & 1;
    const bool prefetch = j + 1 < num_n_tiles;
    T* next_k = sk + (stage ^ 1) * kBlockN * kD;
    T* next_v = sv + (stage ^ 1) * kBlockN * kD;
    [[maybe_unused]] Fp8KvRegs<kD> next;
    if constexpr (kFp8) {
      if (prefetch) LoadKvFp8<kD>(p, tile, kvh, (j + 1) * kBlockN, kv_end, next);
    } else {
      if (prefetch) LoadKvTile<T, kD>(p, tile, kvh, (j + 1) * kBlockN, kv_end, next_k, next_v);
    }
    CpAsyncCommit();  // possibly empty: keeps "all but the newest group" meaning tile j
    CpAsyncWait<1>();
    __syncthreads();
    if (j == n_first) {
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        Ldmatrix4(qf[kk], SmemAddr(sq + Swz<kD>(warp * 16 + (lane & 15), kk * 2 + (lane >> 4))));
      }
    }
    const int n0 = j * kBlockN;
    float s[kBlockN / 8][4];
    QkTile<T, kD>(qf, sk + stage * kBlockN * kD, s);
    const bool mask = n0 + kBlockN - 1 > q_pos_row0 || n0 + kBlockN > kv_end;
    OnlineSoftmax<kD, kSplit>(s, o, m, l, scale_log2, mask, n0, q_pos_row0, kv_end, row_pos);
    PvTile<T, kD>(s, sv + stage * kBlockN * kD, o);
    if constexpr (kFp8) {
      // The other stage was last read in iteration j - 1, which ended with a barrier.
      if (prefetch) StoreKvFp8<T, kD, Kv>(next, next_k, next_v);
    }
    __syncthreads();  // the stage is refilled by iteration j + 1's prefetch
  }
  if constexpr (kSplit) {
    StorePartial<kD, kFp8>(p, tile, kvh, m_rows * p.group, key0, o, m, l, out_scale);
  } else {
    StoreOutput<T, kD>(p, tile, h, m_rows, o, l, out_scale);
  }
}

// Folds each query's split partials in split order: (M, L, O) <- (max(M, m_k), L a + l_k b,
// O a + O_k b) with a = 2^(M - M'), b = 2^(m_k - M'), from (-inf, 0, 0); then out = O / L (FP8
// pages: the V scale is in O already). One warp a (token, q head) of the window's tokens
// [part_token_base, part_token_base + num_tokens); tokens with a negative position are skipped. The
// same fold for every query whatever tile or chunk its partials came from.
template <typename T, int kD>
__global__ void __launch_bounds__(128)
    PrefillSplitMergeKernel(const PrefillParams p, const int32_t* positions, int32_t num_tokens,
                            int32_t min_split_tokens) {
  constexpr int kPer = kD / 32;  // elements a lane
  const int64_t pair = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;
  if (pair >= int64_t{num_tokens} * p.num_q_heads) return;
  const int lane = threadIdx.x % 32;
  const int64_t token = pair / p.num_q_heads;  // in the window: slot row
  const int pos = positions[p.part_token_base + token];
  if (pos < 0) return;
  const int splits = PrefillSplitCount(pos, min_split_tokens, p.max_splits);
  float big_m = -INFINITY, big_l = 0.f, acc[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = 0.f;
  for (int k = 0; k < splits; ++k) {
    const int64_t slot = pair * p.max_splits + k;
    const float2 ml = *reinterpret_cast<const float2*>(p.part_ml + 2 * slot);
    const float m_new = fmaxf(big_m, ml.x);
    const float a = Exp2(big_m - m_new), b = Exp2(ml.x - m_new);  // a = 0 on the first split
    big_l = __fadd_rn(__fmul_rn(big_l, a), __fmul_rn(ml.y, b));
    const float* o = p.part_o + slot * kD + lane * kPer;
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] = __fadd_rn(__fmul_rn(acc[i], a), __fmul_rn(o[i], b));
    big_m = m_new;
  }
  const float inv = 1.f / big_l;
  T* dst = static_cast<T*>(p.out) + (int64_t{p.part_token_base} * p.num_q_heads + pair) * kD +
           lane * kPer;
#pragma unroll
  for (int i = 0; i < kPer; i += 2) {
    *reinterpret_cast<uint32_t*>(dst + i) = PackPair<T>(acc[i] * inv, acc[i + 1] * inv);
  }
}

}  // namespace pkv::prefill::dev
