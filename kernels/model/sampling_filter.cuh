// The filtered draw's multi-CTA part (sampling.h): the value bins of the mass pre-pass's
// histogram, the plan kernel that picks the candidate bins, and the compaction kernel that copies
// their tokens out in id order and sums the mass ranked above them.
#pragma once

#include <climits>

#include "kernels/model/sampling_block.cuh"

namespace pkv::gpu::sampling {

// The plan's margin on the float histogram masses (relative): a float sum of <= 4008 positive
// terms a chunk is within 4008 * 2^-24 = 2.4e-4 of the exact one in the worst case and ~1e-6 in
// practice; a miss costs only the whole-row search (the row's CTA checks with exact sums).
constexpr double kMassMargin = 1e-4;

// The pre-pass histogram's bins for a filtered row: kSampleBins - 1 bins of equal width from the
// row's max `hi` down to `lo`, then one bin for the finite values below lo. lo is the row's
// smallest finite value, raised to a bound below which no token can be kept: top-p keeps no token
// with p < (1 - top_p) / vocab (all of them weigh less than (1 - top_p) of the row's mass, which
// is >= p(max) = 1; the kept prefix reaches top_p of any top-k mass before them), min-p none with
// p < min_p; each with a margin (half the first, 1e-3 in log p for the second). Example: Llama-3
// logits in [-20, 30] at T = 1 with top_p 0.9: lo = 30 - 14.8 = 15.2, bins 0.06 wide. The
// pre-pass and the compaction compute it from the same inputs with the same explicitly rounded
// operations, so they agree on every token's bin.
struct Binning {
  double hi, lo, scale;               // scale = (kSampleBins - 1) / (hi - lo); 0 when hi == lo
  __device__ int Of(float x) const {  // REQUIRES: x finite
    const double d = x;
    if (d < lo) return kSampleBins - 1;
    return min(kSampleBins - 2, static_cast<int>(__dmul_rn(__dsub_rn(hi, d), scale)));
  }
};

__device__ __forceinline__ float RowLowest(const SampleChunkPartial* part) {
  float lo = INFINITY;
  for (int c = 0; c < kSampleChunks; ++c) lo = fminf(lo, part[c].lo);
  return lo;
}

__device__ __forceinline__ Binning BinningOf(const RowView& r, const SampleRowParams& p,
                                             const SampleChunkPartial* part, float best) {
  double log_p = -INFINITY;  // log p(x) below which no token is kept
  if (p.top_p < 1.f) log_p = log(0.5 * (1.0 - static_cast<double>(p.top_p)) / r.vocab);
  if (p.min_p > 0.f) log_p = fmax(log_p, log(static_cast<double>(p.min_p)) - 1e-3);
  // p(x) = exp(x * inv_t - zmax) >= e^log_p  <=>  x >= best + log_p / inv_t
  const double hi = best;
  const double lo =
      fmax(static_cast<double>(RowLowest(part)), __dadd_rn(hi, __ddiv_rn(log_p, r.inv_t)));
  const double scale = hi > lo ? __ddiv_rn(kSampleBins - 1, __dsub_rn(hi, lo)) : 0.0;
  return Binning{hi, lo, scale};
}

__device__ __forceinline__ int BlockMinI(int v, SampleSmem& sm) {
  return BlockReduce(
      v, [](int a, int b) { return a < b ? a : b; }, sm.ired);
}

struct PlanSmem {
  SampleSmem s;
  int count[kSampleBins];      // the row's tokens in bin b
  int cum_count[kSampleBins];  // ... in bins <= b
  double mass[kSampleBins];    // the row's mass in bin b (from the float histogram)
  double cum_mass[kSampleBins];
  int chunk_count[kSampleChunks];  // candidates in chunk c
};

// The first non-empty bin whose cumulative count (or mass) reaches t; kSampleBins when none.
// Every thread calls.
__device__ __forceinline__ int FirstBin(bool by_mass, double t, PlanSmem& sm) {
  const int b = threadIdx.x;
  int mine = INT_MAX;
  if (b < kSampleBins && sm.count[b] > 0 &&
      (by_mass ? sm.cum_mass[b] : static_cast<double>(sm.cum_count[b])) >= t) {
    mine = b;
  }
  return min(kSampleBins, BlockMinI(mine, sm.s));
}

// Plan kernel, grid (max_rows), one CTA a filtered row: the chunks' histograms summed in chunk
// order, then the candidate bins [lo, hi] holding the k-th token (top-k), the min-p count's
// token, and the bins where the top-p mass may be reached (the float masses +- kMassMargin; with
// top-k too, the top-k bin's own mass is unknown, so every bin up to it).
__global__ void __launch_bounds__(kSampleThreads) SamplePlanKernel(const SampleArgs a) {
  __shared__ PlanSmem sm;
  const int row = blockIdx.x;
  if (row >= *a.num_rows) return;
  const SampleRowParams p = a.params[row];
  if (!Filtered(p, a.vocab)) return;
  const SampleScratch ws = ScratchOf(a);
  const SampleChunkPartial* part = ws.partials + int64_t{row} * kSampleChunks;
  float best;
  int best_id;
  RowArgMax(part, &best, &best_id);
  if (isinf(best)) return;  // reported by the row's kernel
  double total = 0.0;
  int num_min_p = 0;
  for (int c = 0; c < kSampleChunks; ++c) {
    total += part[c].mass;
    num_min_p += part[c].num_min_p;
  }
  const int b = threadIdx.x;
  int n_b = 0;
  double w_b = 0.0;
  if (b < kSampleBins) {
    const SampleHistBin* h = ws.hist + int64_t{row} * kSampleChunks * kSampleBins + b;
    for (int c = 0; c < kSampleChunks; ++c) {
      n_b += h[c * kSampleBins].count;
      w_b += h[c * kSampleBins].mass;
    }
  }
  const double n_excl = BlockExclusiveScan(static_cast<double>(n_b), sm.s);
  const double w_excl = BlockExclusiveScan(w_b, sm.s);
  if (b < kSampleBins) {
    sm.count[b] = n_b;
    sm.cum_count[b] = static_cast<int>(n_excl) + n_b;
    sm.mass[b] = w_b;
    sm.cum_mass[b] = w_excl + w_b;
  }
  __syncthreads();
  const int finite = sm.cum_count[kSampleBins - 1];
  const int c_m = max(1, num_min_p);
  const bool use_k = p.top_k > 0 && p.top_k < finite;
  const bool use_m = p.min_p > 0.f && c_m < finite;
  const bool use_p = p.top_p < 1.f;
  const int none = kSampleBins;
  const int b_k = use_k ? FirstBin(false, p.top_k, sm) : none;
  const int b_m = use_m ? FirstBin(false, c_m, sm) : none;
  int bp_lo = none, bp_hi = none;
  if (use_p) {
    const double tp = p.top_p;
    double t_lo = tp * total, t_hi = tp * total;
    if (use_k) {  // the top-k mass lies between the mass above its bin and that with its bin
      t_lo = tp * (sm.cum_mass[b_k] - sm.mass[b_k]);
      t_hi = tp * sm.cum_mass[b_k];
    }
    bp_lo = FirstBin(true, t_lo * (1.0 - kMassMargin), sm);
    bp_hi = FirstBin(true, t_hi * (1.0 + kMassMargin), sm);
    if (use_k) bp_hi = min(bp_hi, b_k);
  }
  // min-p surely cuts first when its token's bin is above every other cut's: then only it matters
  // (top-k and top-p cut later whatever the top-k mass is).
  const bool min_p_first = use_m && b_m < min(b_k, bp_lo);
  const int lo = min_p_first ? b_m : min(min(b_k, b_m), bp_lo);
  // top-k with top-p: the top-k mass is needed exactly, so its whole bin range.
  const int hi = min_p_first ? b_m : use_k && use_p ? b_k : min(min(b_k, b_m), bp_hi);
  int mode = kSamplePlanCandidates;
  if (!use_k && !use_m && !use_p) {
    mode = kSamplePlanNone;  // e.g. top_k >= the finite tokens: the unfiltered draw
  } else if (hi >= kSampleBins - 1 ||
             sm.cum_count[hi] - (sm.cum_count[lo] - sm.count[lo]) > kMaxSampleCandidates) {
    mode = kSamplePlanFullRow;
  }
  if (mode == kSamplePlanCandidates) {  // each chunk's candidates: warp w sums chunks w, w + 16
    for (int c = Warp(); c < kSampleChunks; c += kSampleWarps) {
      const SampleHistBin* h = ws.hist + (int64_t{row} * kSampleChunks + c) * kSampleBins;
      int n = 0;
      for (int bin = lo + Lane(); bin <= hi; bin += 32) n += h[bin].count;
      for (int o = 16; o > 0; o >>= 1) n += __shfl_xor_sync(kFull, n, o);
      if (Lane() == 0) sm.chunk_count[c] = n;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  SamplePlan& out = ws.plans[row];
  out.mode = mode;
  out.lo_bin = lo;
  out.hi_bin = hi;
  out.filters = min_p_first ? kSampleFilterMinP
                            : (use_k ? kSampleFilterTopK : 0) | (use_p ? kSampleFilterTopP : 0) |
                                  (use_m ? kSampleFilterMinP : 0);
  out.num_above = lo < kSampleBins ? sm.cum_count[lo] - sm.count[lo] : 0;
  out.num_min_p = c_m;
  out.mismatch = 0;
  if (mode != kSamplePlanCandidates) return;
  int acc = 0;
  for (int c = 0; c < kSampleChunks; ++c) {
    out.cand_indptr[c] = acc;
    acc += sm.chunk_count[c];
  }
  out.cand_indptr[kSampleChunks] = acc;
}

// Compaction kernel, grid (kSampleChunks, max_rows): chunk c's tokens in the plan's candidate
// bins, in id order (a block-wide ballot scan per 512 ids), at the plan's offsets; and the double
// mass of its tokens in bins above them (a fixed-order block sum) into the chunk's partial.
__global__ void __launch_bounds__(kSampleThreads) SampleCompactKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  const int row = blockIdx.y;
  if (row >= *a.num_rows) return;
  const SampleRowParams p = a.params[row];
  if (!Filtered(p, a.vocab)) return;
  const SampleScratch ws = ScratchOf(a);
  SamplePlan* plan = ws.plans + row;
  if (plan->mode != kSamplePlanCandidates) return;
  SampleChunkPartial* part = ws.partials + int64_t{row} * kSampleChunks;
  float best;
  int best_id;
  RowArgMax(part, &best, &best_id);
  RowView r = RowOf(a, row, p);
  r.zmax = r.Z(best);
  const Binning bins = BinningOf(r, p, part, best);
  const int lo = plan->lo_bin, hi = plan->hi_bin;
  const int begin = plan->cand_indptr[blockIdx.x], end = plan->cand_indptr[blockIdx.x + 1];
  SampleCandidate* out = ws.candidates + int64_t{row} * kMaxSampleCandidates;
  int first, last;
  SampleChunkOf(r.vocab, blockIdx.x, &first, &last);
  double above = 0.0;
  int next = begin;
  for (int i0 = first; i0 < last; i0 += kSampleThreads) {
    const int i = i0 + threadIdx.x;
    bool cand = false;
    float x = -INFINITY;
    if (i < last) {
      x = r.Val(i);
      if (x != -INFINITY) {
        const int b = bins.Of(x);
        if (b < lo) above += r.Prob(x);
        cand = b >= lo && b <= hi;
      }
    }
    const unsigned ballot = __ballot_sync(kFull, cand);
    if (Lane() == 0) sm.ired[Warp()] = __popc(ballot);
    __syncthreads();
    int before = 0, all = 0;
    for (int w = 0; w < kSampleWarps; ++w) {
      before += w < Warp() ? sm.ired[w] : 0;
      all += sm.ired[w];
    }
    const int slot = next + before + __popc(ballot & ((1u << Lane()) - 1u));
    if (cand && slot < end) out[slot] = SampleCandidate{x, i};
    next += all;
    __syncthreads();
  }
  above = BlockSumD(above, sm);
  if (threadIdx.x == 0) {
    part[blockIdx.x].above = above;
    if (next != end) atomicExch(&plan->mismatch, 1);  // never expected: the row searches it all
  }
}

}  // namespace pkv::gpu::sampling
