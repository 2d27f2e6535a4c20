// Block-wide building blocks of the sampling kernel (one CTA of kSampleThreads per row): reductions
// and an exclusive scan whose combination order is fixed (so results are deterministic), the
// row view with the CPU sampler's NaN and probability rules, and the counter-based uniform.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/model/sampling.h"

namespace pkv::gpu::sampling {

constexpr int kSampleThreads = 512;
constexpr int kSampleWarps = kSampleThreads / 32;
constexpr int kBins = 256;
constexpr unsigned kFull = 0xffffffffu;

static_assert(kBins == kSampleBins, "the row search and the pre-pass histogram share the bins");

struct SampleSmem {
  double dred[kSampleWarps];
  float fred[kSampleWarps];
  int ired[kSampleWarps];
  int hist_cnt[kBins];
  double hist_w[kBins];
  float hist_wf[kBins];              // the pre-pass histogram's masses (float, see SampleHistBin)
  double chunk_kept[kSampleChunks];  // the filtered draw: each chunk's kept mass
  double bcast_d;
  int bcast_i;
  int top_n;
  int top_ids[kMaxTopLogprobs];
  float top_vals[kMaxTopLogprobs];
};

// The filtered draw's candidates, staged by the row's CTA (sampling_types.h).
struct CandSmem {
  float vals[kMaxSampleCandidates];
  int ids[kMaxSampleCandidates];
};

// One row of logits as the CPU sampler sees it: NaN counts as -inf; p(x) = exp(x * inv_t - zmax)
// in double (0 for -inf).
struct RowView {
  const float* logits;  // [vocab]
  int vocab;
  double inv_t;
  double zmax;
  __device__ int Size() const { return vocab; }
  __device__ int Id(int i) const { return i; }
  __device__ float Val(int i) const {
    const float x = logits[i];
    return isnan(x) ? -INFINITY : x;
  }
  // z = x * inv_t rounded to double, as the CPU stores it, then z - zmax: the explicit-rounding
  // intrinsics keep the compiler from fusing them into one FMA, which would skip the product's
  // rounding and make p(max) = exp(+-1 ulp) instead of exactly 1 (min_p = 1 then keeps nothing).
  __device__ double Z(float x) const { return __dmul_rn(static_cast<double>(x), inv_t); }
  __device__ double Prob(float x) const {
    return x == -INFINITY ? 0.0 : exp(__dsub_rn(Z(x), zmax));
  }
};

// The filtered draw's candidates (sampling_types.h) as a view like RowView's: element j is token
// ids[j] with value vals[j], ascending ids, so index order is id order.
struct CandView {
  const float* vals;  // [n]
  const int* ids;     // [n]
  int n;
  RowView row;  // for the probabilities
  __device__ int Size() const { return n; }
  __device__ int Id(int j) const { return ids[j]; }
  __device__ float Val(int j) const { return vals[j]; }
  __device__ double Prob(float x) const { return row.Prob(x); }
};

// A prefix of the ranking (larger value first, lower id on ties): token i with value x is in it
// iff x > v or (x == v and i <= c). {-inf, vocab - 1} is the whole vocabulary.
struct Cut {
  float v;
  int c;
  __device__ bool Keeps(float x, int i) const { return x > v || (x == v && i <= c); }
};

__device__ __forceinline__ int Lane() { return threadIdx.x % 32; }
__device__ __forceinline__ int Warp() { return threadIdx.x / 32; }

// Reductions: every thread of the block must call; every thread gets the result.
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();  // a previous reduction may still read scratch
  if (Lane() == 0) scratch[Warp()] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < kSampleWarps; ++w) r = op(r, scratch[w]);
  return r;
}
__device__ __forceinline__ double BlockSumD(double v, SampleSmem& sm) {
  return BlockReduce(
      v, [](double a, double b) { return a + b; }, sm.dred);
}
__device__ __forceinline__ float BlockMinF(float v, SampleSmem& sm) {
  return BlockReduce(
      v, [](float a, float b) { return fminf(a, b); }, sm.fred);
}
__device__ __forceinline__ float BlockMaxF(float v, SampleSmem& sm) {
  return BlockReduce(
      v, [](float a, float b) { return fmaxf(a, b); }, sm.fred);
}
__device__ __forceinline__ int BlockMaxI(int v, SampleSmem& sm) {
  return BlockReduce(
      v, [](int a, int b) { return a > b ? a : b; }, sm.ired);
}

// Arg max with ties to the lower id. (v, id) in, the block's best out in both.
__device__ __forceinline__ void BlockArgMax(float* v, int* id, SampleSmem& sm) {
  float bv = *v;
  int bi = *id;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, bv, o);
    const int oi = __shfl_xor_sync(kFull, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  __syncthreads();
  if (Lane() == 0) {
    sm.fred[Warp()] = bv;
    sm.ired[Warp()] = bi;
  }
  __syncthreads();
  bv = sm.fred[0];
  bi = sm.ired[0];
  for (int w = 1; w < kSampleWarps; ++w) {
    if (sm.fred[w] > bv || (sm.fred[w] == bv && sm.ired[w] < bi)) {
      bv = sm.fred[w];
      bi = sm.ired[w];
    }
  }
  *v = bv;
  *id = bi;
}

// Exclusive prefix sum over threads in thread order.
__device__ __forceinline__ double BlockExclusiveScan(double v, SampleSmem& sm) {
  double incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(kFull, incl, o);
    if (Lane() >= o) incl += y;
  }
  double excl = __shfl_up_sync(kFull, incl, 1);
  if (Lane() == 0) excl = 0.0;
  __syncthreads();
  if (Lane() == 31) sm.dred[Warp()] = incl;
  __syncthreads();
  double prefix = 0.0;
  for (int w = 0; w < Warp(); ++w) prefix += sm.dred[w];
  return prefix + excl;
}

// The thread's contiguous id range for id-ordered scans: [begin, end).
__device__ __forceinline__ void ChunkRange(int vocab, int* begin, int* end) {
  const int chunk = (vocab + kSampleThreads - 1) / kSampleThreads;
  *begin = min(vocab, static_cast<int>(threadIdx.x) * chunk);
  *end = min(vocab, *begin + chunk);
}

// Chunk c of a row split into kSampleChunks contiguous id ranges (the pre-pass's): [begin, end),
// empty for the tail chunks of a vocabulary smaller than kSampleChunks.
__device__ __forceinline__ void SampleChunkOf(int vocab, int c, int* begin, int* end) {
  const int chunk = (vocab + kSampleChunks - 1) / kSampleChunks;
  *begin = min(vocab, c * chunk);
  *end = min(vocab, *begin + chunk);
}

// The workspace's parts (sampling_types.h).
struct SampleScratch {
  SampleChunkPartial* partials;  // [max_rows][kSampleChunks]
  SampleHistBin* hist;           // [max_rows][kSampleChunks][kSampleBins]
  SamplePlan* plans;             // [max_rows]
  SampleCandidate* candidates;   // [max_rows][kMaxSampleCandidates]
};
__device__ __forceinline__ SampleScratch ScratchOf(const SampleArgs& a) {
  const SampleWorkspaceLayout l = SampleWorkspaceLayoutFor(a.max_rows);
  char* b = static_cast<char*>(a.workspace);
  return SampleScratch{reinterpret_cast<SampleChunkPartial*>(b + l.partials),
                       reinterpret_cast<SampleHistBin*>(b + l.hist),
                       reinterpret_cast<SamplePlan*>(b + l.plans),
                       reinterpret_cast<SampleCandidate*>(b + l.candidates)};
}

__device__ __forceinline__ RowView RowOf(const SampleArgs& a, int row, const SampleRowParams& p) {
  const bool greedy = p.temperature <= 0.f;
  return RowView{a.logits + static_cast<int64_t>(row) * a.vocab, a.vocab,
                 greedy ? 1.0 : 1.0 / static_cast<double>(p.temperature), 0.0};
}

__device__ __forceinline__ bool NeedsMass(const SampleRowParams& p) {
  return p.temperature > 0.f || p.logprobs;
}

// A sampled row with top-k, top-p or min-p (greedy rows ignore them).
__device__ __forceinline__ bool Filtered(const SampleRowParams& p, int vocab) {
  return p.temperature > 0.f &&
         ((p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.f || p.min_p > 0.f);
}

// The row's arg max from its chunks' (ties: lower id), the same fixed order in every reader.
__device__ __forceinline__ void RowArgMax(const SampleChunkPartial* part, float* best,
                                          int* best_id) {
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int c = 0; c < kSampleChunks; ++c) {
    const float v = part[c].best;
    const int i = part[c].best_id;
    if (v > bv || (v == bv && i < bi)) {
      bv = v;
      bi = i;
    }
  }
  *best = bv;
  *best_id = bi;
}

// SplitMix64 finaliser and the counter-based uniform of worker/model/sampler.h, bit for bit.
__device__ __forceinline__ uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ double CounterUniform(uint64_t seed, uint64_t index) {
  const uint64_t key = Mix64(seed);
  const uint64_t r = Mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

}  // namespace pkv::gpu::sampling
