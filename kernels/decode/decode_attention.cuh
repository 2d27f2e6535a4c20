// The decode-attention kernel behind every route: one CTA per work item (a token range of one
// row for one KV head), serving all G <= 8 query heads of that KV head so each KV byte is read
// once per step.
//
// Data flow per item:
//  - The item and, when the plan carries them (DecodePlan::item_pids), the page ids of its first
//    pages arrive in one round trip; the first K/V tiles are then issued together with Q (G rows,
//    zero-padded to 8) and any page ids of the first `stages` tiles the prefix lacks (without a
//    prefix: Q and those page ids first, then the tiles). K/V tiles of warps*16 tokens stream
//    through a `stages`-deep cp.async ring (16-byte copies, zero-filled past the item's end);
//    the prologue fills the whole ring, so a short item's tiles are all in flight at once.
//    Page ids of later tiles are prefetched into registers one tile ahead, so the indirection
//    never stalls the stream; a copy's address is a 32-bit row index times the row's bytes.
//  - Warp w owns tokens [16w, 16w+16) of every tile. Scores are computed transposed,
//    S^T[16 tokens][8 heads] = K * Q^T with mma.m16n8k16 (A = K via ldmatrix, B = Q^T), so the 8
//    query heads are the MMA's n = 8 and no row padding to 16 is wasted. The probabilities are
//    moved into the B-operand layout with movmatrix.trans and O^T[D][8] += V^T * P^T uses
//    ldmatrix.trans on V. fp32 accumulators; online softmax in base 2 (decode_params.h).
//  - FP8 pages (Kv = KvE4M3 / KvE5M2): the ring holds 1-byte codes, read by decode_tile_fp8.cuh's
//    AttendTileFp8 and converted in registers to fp16 (the MMAs run in fp16 for bf16 queries too);
//    the K scale is folded into the softmax scale and the V scale into the output, once per item.
//  - At the item's end the warps' states are combined through shared memory and written as the
//    output (single split) or as a partial state; a multi-split pair's last CTA to finish (atomic
//    ticket) merges all its partials in place when merge_in_kernel is set.
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/common/pdl.cuh"
#include "kernels/decode/decode_params.h"
#include "kernels/decode/decode_tile_fp8.cuh"
#include "kernels/decode/device_util.cuh"
#include "kernels/decode/fp8_convert.cuh"
#include "kernels/decode/merge.cuh"
#include "kernels/decode/smem_layout.h"
#include "kernels/decode/warp_state.cuh"

namespace pkv::decode::dev {

// n / page_size for 0 <= n < 2^31 by the launcher's multiply-shift divisor, summed in 32 bits:
// umulhi(n, mul) < n, so hi + n < 2^32 (FastDivmod::Div sums in 64 bits, one add and shift
// more). Every token position of an item is below 2^31.
__device__ __forceinline__ uint32_t PageOf(const FastDivmod& f, int n) {
  const uint32_t u = static_cast<uint32_t>(n);
  return (__umulhi(u, f.mul) + u) >> f.shift;
}

// Takes a merge ticket for the item's (row, kv head); the last of its splits merges them all.
template <int kD, typename T, typename Kv>
__device__ void TicketAndMerge(const DecodeParams& p, const WorkItem& it, uint8_t* smem,
                               int32_t* ticket) {
  __threadfence();  // this CTA's partial writes are visible GPU-wide before the ticket
  __syncthreads();
  int32_t* counter = p.counters + it.row * p.num_kv_heads + it.kv_head;
  if (threadIdx.x == 0) *ticket = atomicAdd(counter, 1);
  __syncthreads();
  if (*ticket != it.num_splits - 1) return;
  __threadfence();
  // The ring is drained: all of it holds the staged partials.
  const AttentionSmem lay{kD, static_cast<int32_t>(blockDim.x >> 5), p.stages, kKvElemBytes<Kv>};
  MergePair<kD, T>(p, it.row, it.kv_head, it.first_partial, it.num_splits, smem, lay.q_offset());
  if (threadIdx.x == 0) *counter = 0;  // every split has arrived: ready for the next launch
}

// An item with no tokens: a row of length 0 (zero output, LSE -inf) or an empty split (neutral
// state: LSE -inf only; the merge never reads its output).
template <int kD, typename T>
__device__ void EmptyItem(const DecodeParams& p, const WorkItem& it) {
  const int g = p.group;
  if (it.num_splits == 1) {
    for (int e = threadIdx.x; e < g * (kD / 4); e += blockDim.x) {
      const int h = e / (kD / 4), d = (e - h * (kD / 4)) * 4;
      WriteOutput<kD, T>(p, it.row, it.kv_head, h, d, make_float4(0.f, 0.f, 0.f, 0.f), NegInf());
    }
  } else if (threadIdx.x < g) {
    p.partial_lse[static_cast<int64_t>(it.first_partial + it.split_index) * g + threadIdx.x] =
        NegInf();
  }
}

// Scores and P.V for the warp's 16 tokens of one tile held in ring slot (kb, vb).
template <int kD, typename T>
__device__ __forceinline__ void AttendTile(WarpState<kD>& st, const uint32_t (&qf)[kD / 16][2],
                                           uint32_t kb, uint32_t vb, int first_token, int len,
                                           float scale_log2) {
  constexpr int kSteps = kD / 16;
  const int lane = threadIdx.x & 31, wr = (threadIdx.x >> 5) * 16;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int krow = wr + (lane & 7) + ((lane >> 3) & 1) * 8;
  const uint32_t kaddr = kb + krow * (kD * 2);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    uint32_t a[4];
    Ldmatrix4(a, kaddr + (((2 * ks + (lane >> 4)) ^ (krow & 7)) << 4));
    Mma16816<T>(acc, a, qf[ks][0], qf[ks][1]);
  }
  uint32_t pb0, pb1;
  OnlineSoftmaxStep<kD, T>(st, acc, first_token, len, scale_log2, &pb0, &pb1);
  const int vrow = wr + (lane & 7) + (lane >> 4) * 8;
  const uint32_t vaddr = vb + vrow * (kD * 2);
#pragma unroll
  for (int mt = 0; mt < kSteps; ++mt) {
    uint32_t a[4];
    Ldmatrix4Trans(a, vaddr + (((2 * mt + ((lane >> 3) & 1)) ^ (vrow & 7)) << 4));
    Mma16816<T>(st.o[mt], a, pb0, pb1);
  }
}

// Combines the warps' states through shared memory (the drained ring) and writes the item's
// output or partial state.
// out_scale multiplies the output (the FP8 V scale; 1 for 16-bit pages); kFp8Order: the state's
// d slots are in decode_tile_fp8.cuh's order.
template <int kD, typename T, bool kFp8Order>
__device__ void CombineAndWrite(const DecodeParams& p, const WorkItem& it, WarpState<kD>& st,
                                uint8_t* smem, float out_scale) {
  constexpr int kRow = kD + 4;  // +4 floats: conflict-free fragment stores
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  float* so = reinterpret_cast<float*>(smem);  // [warps][8][kRow]
  float* sm = so + nwarps * 8 * kRow;          // [warps][8]
  float* sl = sm + nwarps * 8;                 // [warps][8]
  const int r = lane >> 2, h0 = 2 * (lane & 3);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    st.l[j] = WarpSumXor4to16(st.l[j]);
    float* dst = so + (warp * 8 + h0 + j) * kRow;
#pragma unroll
    for (int mt = 0; mt < kD / 16; ++mt) {
      if constexpr (kFp8Order) {
        dst[Fp8Dim(mt, r)] = st.o[mt][j];
        dst[Fp8Dim(mt, r) + 1] = st.o[mt][j + 2];
      } else {
        dst[16 * mt + r] = st.o[mt][j];
        dst[16 * mt + r + 8] = st.o[mt][j + 2];
      }
    }
    if (r == 0) {
      sm[warp * 8 + h0 + j] = st.m[j];
      sl[warp * 8 + h0 + j] = st.l[j];
    }
  }
  __syncthreads();
  const int g = p.group;
  for (int e = threadIdx.x; e < g * (kD / 4); e += blockDim.x) {
    const int h = e / (kD / 4), d = (e - h * (kD / 4)) * 4;
    float m = NegInf();
    for (int w = 0; w < nwarps; ++w) m = fmaxf(m, sm[w * 8 + h]);
    float l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int w = 0; w < nwarps; ++w) {
      const float f = Exp2(sm[w * 8 + h] - m);  // m is finite: the item has a token
      const float4 x = *reinterpret_cast<const float4*>(so + (w * 8 + h) * kRow + d);
      l += sl[w * 8 + h] * f;
      acc.x += f * x.x;
      acc.y += f * x.y;
      acc.z += f * x.z;
      acc.w += f * x.w;
    }
    const float inv = out_scale / l;
    const float4 v = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    const float lse2 = m + __log2f(l);
    if (it.num_splits == 1) {
      WriteOutput<kD, T>(p, it.row, it.kv_head, h, d, v, lse2);
    } else {
      const int64_t slot = it.first_partial + it.split_index;
      *reinterpret_cast<float4*>(p.partial_o + (slot * g + h) * kD + d) = v;
      if (d == 0) p.partial_lse[slot * g + h] = lse2;
    }
  }
}

// Runs item `item_index`. live_count: nullptr, or the graph-sized launch's item count in the
// workspace header, loaded in the same round trip as the item (which lies inside the workspace's
// capacity either way); the CTA skips the item when item_index - p.first >= *live_count.
// Returns false when it skipped.
template <int kD, typename T, typename Kv>
__device__ bool ProcessItem(const DecodeParams& p, int item_index, uint8_t* smem,
                            const int32_t* live_count) {
  constexpr bool kFp8 = kIsFp8Kv<Kv>;
  constexpr int kEb = kKvElemBytes<Kv>;
  constexpr int kRowBytes = kD * kEb;
  constexpr int kChunks = kRowBytes / 16;  // 16-byte chunks per token row
  constexpr int kPasses = kChunks / 2;     // token rows each thread loads per tile
  const AttentionSmem lay{kD, static_cast<int32_t>(blockDim.x >> 5), p.stages, kEb};
  const int tid = threadIdx.x, lane = tid & 31;
  const int tile_tokens = lay.tile_tokens(), tile_bytes = lay.tile_bytes();
  const int stages = p.stages;
  __syncthreads();  // the CTA's previous item is done with shared memory
  const uint32_t ring = SmemAddr(smem);
  const uint32_t qs = ring + lay.q_offset();
  const int32_t* pid_s = reinterpret_cast<const int32_t*>(smem + lay.pid_offset());
  // Round trip 1: the item, its first kItemPagePrefix page ids when the plan carries them (into
  // pid_s[0, kItemPagePrefix), by item index: no dependency on the item) and the live count.
  const bool has_prefix = p.item_pids != nullptr;
  if (has_prefix && tid < kItemPagePrefix / 4) {
    CpAsync16(SmemAddr(pid_s + 4 * tid),
              p.item_pids + static_cast<int64_t>(item_index) * kItemPagePrefix + 4 * tid, true);
  }
  CpAsyncCommit();
  const WorkItem it = p.items[item_index];
  const int live = live_count != nullptr ? *live_count : 0;
  // Programmatic dependent launch (pdl.cuh): everything above is the step's plan and block table,
  // copied before the step's first kernel; Q and this step's K/V rows come from the previous
  // kernel, and the outputs may still be read by it. A no-op after a CTA's first item. No early
  // PdlTrigger: the next kernel (a GEMV of fewer CTAs than SM slots) launched while attention
  // holds the SMs is placed greedily, up to its occupancy, on the SMs that free first, and runs
  // on too few of them (H200: 8B fused steps 36% slower, results/2026-12-03-h200-attnpdl).
  gpu::PdlWait();
  if (live_count != nullptr && item_index - p.first >= live) {
    CpAsyncWait<0>();  // nothing may still write shared memory when the CTA moves on
    return false;
  }
  const int len = it.token_end - it.token_begin;
  int32_t* ticket = reinterpret_cast<int32_t*>(smem + lay.misc_offset());
  if (len <= 0) {
    CpAsyncWait<0>();
    EmptyItem<kD, T>(p, it);
    if (it.num_splits > 1 && p.merge_in_kernel) TicketAndMerge<kD, T, Kv>(p, it, smem, ticket);
    return true;
  }
  const uint32_t first_page = PageOf(p.page_div, it.token_begin);  // exact: begin is page-aligned

  // Round trip 2 (with the first K/V tiles when the prefix covers them): Q rows (zero-filled
  // past G) and the page ids of the first `stages` tiles the prefix does not hold.
  const int g = p.group;
  const int item_pages = static_cast<int>(PageOf(p.page_div, len + p.page_size - 1));
  const int npro =
      min(item_pages, static_cast<int>(PageOf(p.page_div, stages * tile_tokens + p.page_size - 1)));
  const int have = has_prefix ? min(npro, kItemPagePrefix) : 0;
  CpAsyncWait<0>();
  __syncthreads();  // the prefix is in pid_s for every thread
  const T* qrow = static_cast<const T*>(p.q) +
                  (static_cast<int64_t>(it.row) * p.num_q_heads + it.kv_head * g) * kD;
  constexpr int kQChunks = kD / 8;  // Q rows are 16-bit whatever the pages hold
  for (int e = tid; e < 8 * kQChunks; e += blockDim.x) {
    const int h = e / kQChunks, c = e - h * kQChunks;
    CpAsync16(qs + (h * lay.q_row_elems() + c * 8) * 2, qrow + (h < g ? h : 0) * kD + c * 8, h < g);
  }
  for (int e = have + tid; e < npro; e += blockDim.x) {
    CpAsync4(SmemAddr(pid_s + e), p.page_ids + it.page_base + first_page + e);
  }
  CpAsyncCommit();

  const int ld_row0 = tid / kChunks, ld_chunk = tid % kChunks;
  const int rows_per_pass = blockDim.x / kChunks;
  const uint32_t ld_chunk_bytes = ld_chunk * 16;
  // A thread copies 16-byte chunk ld_chunk of rows ld_row0 + k * rows_per_pass (k < kPasses) of
  // every tile. pids[k] holds the page id of the thread's row k of a tile, read one tile ahead
  // (shared memory in the prologue, the block table in the loop) and used only when the tile's
  // copies are issued, so the load's latency is hidden behind a tile of work. At the copy a row's
  // cache address is its 32-bit row index (page id * page_rows + kv_head * page_size + slot in
  // the page) times the row's bytes: one IMAD.WIDE from the thread's chunk base for K and one
  // for V (decode5: the former 64-bit page-stride math and DivMod were ~2/3 of a short item's
  // prologue instructions). Invalid rows (past len) use index 0 and copy nothing.
  const uint8_t* kc = static_cast<const uint8_t*>(p.k_cache) + ld_chunk_bytes;
  const uint8_t* vc = static_cast<const uint8_t*>(p.v_cache) + ld_chunk_bytes;
  const uint32_t head_row0 = static_cast<uint32_t>(it.kv_head) * p.page_size;
  const int32_t* item_page_ids = p.page_ids + it.page_base + first_page;
  const uint32_t last_page = static_cast<uint32_t>(item_pages - 1);
  int32_t pids[kPasses];
  // pos: the row's token within the item (token_begin is page-aligned, so its page within the
  // item is pos / page_size).
  auto pids_from_smem = [&](int tile) {
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int pos = tile * tile_tokens + ld_row0 + k * rows_per_pass;
      pids[k] = pid_s[PageOf(p.page_div, pos)];  // in bounds: pos < stages * tile_tokens
    }
  };
  auto pids_from_global = [&](int tile) {
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int pos = tile * tile_tokens + ld_row0 + k * rows_per_pass;
      // Clamped to the item's last page: an unconditional load (no branch around it).
      pids[k] = __ldg(item_page_ids + min(PageOf(p.page_div, pos), last_page));
    }
  };
  // One copy of the loop per L2 prefetch hint (a run-time kernel variant), chosen once per tile.
  auto issue_hinted = [&](int tile, int slot, auto hint) {
    constexpr int kHint = decltype(hint)::value;
    const uint32_t kdst = ring + slot * 2 * tile_bytes, vdst = kdst + tile_bytes;
#pragma unroll
    for (int k = 0; k < kPasses; ++k) {
      const int r = ld_row0 + k * rows_per_pass;
      const int pos = tile * tile_tokens + r;
      const bool valid = pos < len;
      const uint32_t page = PageOf(p.page_div, pos);
      const uint32_t row = valid ? static_cast<uint32_t>(pids[k]) * p.page_rows + head_row0 +
                                       (pos - page * p.page_size)
                                 : 0u;
      const uint8_t* ksrc = MadWide(row, kRowBytes, kc);
      const uint8_t* vsrc = MadWide(row, kRowBytes, vc);
      // 16-bit rows: chunks XOR (row & 7) for ldmatrix; FP8 rows: fp8_convert.cuh's swizzles.
      const uint32_t sk =
          r * kRowBytes + ((kFp8 ? Fp8SwizzleK<kChunks>(ld_chunk, r) : ld_chunk ^ (r & 7)) << 4);
      const uint32_t sv =
          r * kRowBytes + ((kFp8 ? Fp8SwizzleV<kChunks>(ld_chunk, r) : ld_chunk ^ (r & 7)) << 4);
      if constexpr (kHint == 0) {
        CpAsync16(kdst + sk, ksrc, valid);
        CpAsync16(vdst + sv, vsrc, valid);
      } else {
        CpAsync16Prefetch<kHint>(kdst + sk, ksrc, valid);
        CpAsync16Prefetch<kHint>(vdst + sv, vsrc, valid);
      }
    }
  };
  auto issue = [&](int tile, int slot) {
    if (p.l2_prefetch == 256) {
      issue_hinted(tile, slot, std::integral_constant<int, 256>());
    } else if (p.l2_prefetch == 128) {
      issue_hinted(tile, slot, std::integral_constant<int, 128>());
    } else {
      issue_hinted(tile, slot, std::integral_constant<int, 0>());
    }
  };

  // Prologue: every slot of the ring is free, so all `stages` tiles go out now (an item of at
  // most `stages` tiles pays one DRAM round trip for its K/V, not one per tile). Tiles whose
  // pages are all in the prefix are issued at once; the others once the block table's page ids
  // (committed with Q, before them) have landed. One commit group per prologue tile.
  const int tile_shift = 31 - __clz(tile_tokens);  // tile_tokens = warps * 16, a power of two
  const int ntiles = (len + tile_tokens - 1) >> tile_shift;
  const int covered = have * p.page_size;  // tokens whose page ids pid_s holds already
  const int early = len <= covered ? stages : min(stages, covered >> tile_shift);
  for (int s = 0; s < stages; ++s) {
    if (s == early) {
      CpAsyncWaitDynamic(s);  // Q and the page ids have landed (only the early tiles pending)
      __syncthreads();
    }
    if (s < ntiles) {
      pids_from_smem(s);
      issue(s, s);
    }
    CpAsyncCommit();
  }
  // Q has landed once at most the prologue's tiles are pending.
  CpAsyncWaitDynamic(stages);
  __syncthreads();
  uint32_t qf[kD / 16][2];
  if constexpr (kFp8) {
    LoadQFragmentsFp8<kD, T>(qf, qs, lay.q_row_elems());
  } else {
#pragma unroll
    for (int k2 = 0; k2 < kD / 32; ++k2) {
      uint32_t r4[4];
      Ldmatrix4(r4, qs + ((lane & 7) * lay.q_row_elems() + (4 * k2 + (lane >> 3)) * 8) * 2);
      qf[2 * k2][0] = r4[0];
      qf[2 * k2][1] = r4[1];
      qf[2 * k2 + 1][0] = r4[2];
      qf[2 * k2 + 1][1] = r4[3];
    }
  }
  // FP8: the K scale rides on the softmax scale, the V scale on the output (decode_params.h);
  // bf16 queries were scaled into fp16 by kFp8BfQueryScale.
  constexpr float kQUnscale = std::is_same_v<T, __half> ? 1.f : 1.f / kFp8BfQueryScale;
  const float scale_log2 =
      kFp8 ? p.scale_log2 * p.k_scale * Fp8Unit<Kv>() * kQUnscale : p.scale_log2;
  const float out_scale = kFp8 ? p.v_scale * Fp8Unit<Kv>() : 1.f;
  WarpState<kD> st;
#pragma unroll
  for (int mt = 0; mt < kD / 16; ++mt) st.o[mt][0] = st.o[mt][1] = st.o[mt][2] = st.o[mt][3] = 0.f;
  st.m[0] = st.m[1] = NegInf();
  st.l[0] = st.l[1] = 0.f;
  if (stages < ntiles) pids_from_global(stages);
  int read_slot = 0, write_slot = stages - 1;
  for (int i = 0; i < ntiles; ++i) {
    // Tile i has landed (this thread's copies). Groups committed after tile i: stages - 1 for
    // tile 0 (the rest of the prologue); stages - 2 for i >= 1 (tile t >= stages is committed
    // at iteration t - stages + 1, and iteration 0 commits nothing).
    CpAsyncWaitDynamic(i == 0 ? stages - 1 : stages - 2);
    __syncthreads();  // ... everyone's, and slot i-1 is free for reuse
    // Iteration i >= 1 refills slot i-1 with tile i + stages - 1 (the prologue issued tiles
    // 0 .. stages-1, so iteration 0 has nothing to issue).
    if (i > 0) {
      const int j = i + stages - 1;
      if (j < ntiles) issue(j, write_slot);
      CpAsyncCommit();
      if (j + 1 < ntiles) pids_from_global(j + 1);
    }
    const uint32_t kb = ring + read_slot * 2 * tile_bytes;
    if constexpr (kFp8) {
      AttendTileFp8<kD, Kv>(st, qf, kb, kb + tile_bytes, i * tile_tokens, len, scale_log2);
    } else {
      AttendTile<kD, T>(st, qf, kb, kb + tile_bytes, i * tile_tokens, len, scale_log2);
    }
    read_slot = read_slot + 1 == stages ? 0 : read_slot + 1;
    write_slot = write_slot + 1 == stages ? 0 : write_slot + 1;
  }
  CpAsyncWait<0>();
  __syncthreads();  // the ring is drained and every warp is done with it
  // The item again (an L1 hit) rather than its fields kept live through the loop: at the
  // 128-register cap those registers are what keeps the loop free of spills.
  const WorkItem done = p.items[item_index];
  CombineAndWrite<kD, T, kFp8>(p, done, st, smem, out_scale);
  if (done.num_splits > 1 && p.merge_in_kernel) TicketAndMerge<kD, T, Kv>(p, done, smem, ticket);
  return true;
}

// Non-persistent launches: CTA b runs items first + b, first + b + gridDim.x, ... (a graph-sized
// grid strides over however many items the header says). Persistent launches: CTA b runs items
// first + [cta_item_indptr[b], cta_item_indptr[b + 1]).
// Register cap: two 256-thread CTAs (or four of 128) per SM for head dims up to 128, where the
// shared-memory ring allows that many; head dim 256 keeps its O^T and Q fragments (96 + 32
// registers) unspilled with one 256-thread CTA per SM.
template <int kD>
constexpr int kMinCtasPerSm = kD <= 128 ? 2 : 1;

// Kv: T for 16-bit pages, KvE4M3 / KvE5M2 for FP8 pages.
template <int kD, typename T, typename Kv = T>
__global__ void __launch_bounds__(256, kMinCtasPerSm<kD>)
    DecodeAttentionKernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
  // One call site of ProcessItem (each inlined copy of the item loop costs registers).
  const bool persistent = p.cta_item_indptr != nullptr;
  const bool from_header = !persistent && p.count_from_header;
  int i = persistent ? p.cta_item_indptr[blockIdx.x] : static_cast<int>(blockIdx.x);
  const int end = persistent ? p.cta_item_indptr[blockIdx.x + 1] : from_header ? INT_MAX : p.count;
  const int step = persistent ? 1 : static_cast<int>(gridDim.x);
  // Graph-sized grids: the CTA's first item is requested together with the count (index
  // blockIdx.x < grid <= the item capacity); later ones only once the count is known (an L1 hit).
  for (; i < end; i += step) {
    const bool first = i == static_cast<int>(blockIdx.x);
    if (from_header && !first && i >= p.header[0]) break;
    if (!ProcessItem<kD, T, Kv>(p, p.first + i, smem, from_header && first ? p.header : nullptr)) {
      break;
    }
  }
  // A CTA that ran no item still completes only after the previous kernel; one that did waited
  // in its first item (a second wait would overwrite that one in a timeline build).
  gpu::PdlWait(/*timeline=*/false);
  gpu::TimelineExitMark();
}

}  // namespace pkv::decode::dev
