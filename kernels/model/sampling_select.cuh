// The sampling kernel's searches for a prefix of the ranking (larger value first, lower id on
// ties), run by one CTA over a view: the whole row (RowView) or the filtered draw's compacted
// candidates (CandView). A view gives Size(), Val(j), Id(j) (ascending in j) and Prob(x).
#pragma once

#include <climits>

#include "kernels/model/sampling_block.cuh"

namespace pkv::gpu::sampling {

template <bool kMass, typename View>
__device__ __forceinline__ double Weight(const View& r, float x) {
  return kMass ? r.Prob(x) : 1.0;
}

// The first non-empty bucket, in order, at which the running weight start + w_0 + ... reaches
// `target` (>=, or > when kStrict); when rounding leaves the total short of it, the last
// non-empty bucket (-1 when all are empty). bucket(b, &w) says whether bucket b is non-empty and
// sets its weight. *before gets the running weight ahead of the chosen bucket. One thread. (The
// histogram search's bin and the unfiltered draw's chunk are both found by it.)
template <bool kStrict, typename Bucket>
__device__ int FirstReaching(int n, Bucket bucket, double start, double target, double* before) {
  double cum = start, last_cum = start;
  int last = -1;
  for (int b = 0; b < n; ++b) {
    double w;
    if (!bucket(b, &w)) continue;
    last = b;
    last_cum = cum;
    if (kStrict ? cum + w > target : cum + w >= target) {
      *before = cum;
      return b;
    }
    cum += w;
  }
  *before = last_cum;
  return last;
}

// Among the elements whose value is exactly v, in index (= id) order, the index of the first at
// which the running weight reaches `needed`; the last such one when rounding leaves it short.
template <bool kMass, typename View>
__device__ int TieCut(const View& r, float v, double needed, SampleSmem& sm) {
  int b, e;
  ChunkRange(r.Size(), &b, &e);
  double s = 0.0;
  for (int i = b; i < e; ++i) {
    const float x = r.Val(i);
    if (x == v) s += Weight<kMass>(r, x);
  }
  const double excl = BlockExclusiveScan(s, sm);
  if (threadIdx.x == 0) sm.bcast_i = INT_MAX;
  __syncthreads();
  if (excl < needed && excl + s >= needed) {
    double cum = excl;
    for (int i = b; i < e; ++i) {
      const float x = r.Val(i);
      if (x != v) continue;
      cum += Weight<kMass>(r, x);
      if (cum >= needed) {
        atomicMin(&sm.bcast_i, i);  // rounding could let two chunks claim the cut: lowest wins
        break;
      }
    }
  }
  __syncthreads();
  const int c = sm.bcast_i;
  if (c != INT_MAX) return c;
  int last = -1;
  for (int i = b; i < e; ++i) last = r.Val(i) == v ? i : last;
  return BlockMaxI(last, sm);
}

__device__ __forceinline__ int Bin(float x, double hi, double scale) {
  return min(kBins - 1, static_cast<int>((hi - static_cast<double>(x)) * scale));
}

// The shortest prefix of the ranking whose weight (count, or probability mass when kMass) reaches
// `want`: a refining histogram search over the finite values, then TieCut at the cut's value. In
// mass mode a `want` above the total mass keeps everything (the CPU never cuts then either).
template <bool kMass, typename View>
__device__ Cut SelectCut(const View& r, double want, SampleSmem& sm) {
  float lo = INFINITY, hi = -INFINITY;
  double w_finite = 0.0;
  for (int i = threadIdx.x; i < r.Size(); i += kSampleThreads) {
    const float x = r.Val(i);
    if (x == -INFINITY) continue;
    lo = fminf(lo, x);
    hi = fmaxf(hi, x);
    w_finite += Weight<kMass>(r, x);
  }
  lo = BlockMinF(lo, sm);
  hi = BlockMaxF(hi, sm);
  w_finite = BlockSumD(w_finite, sm);
  if (w_finite < want) {
    if (kMass) return Cut{-INFINITY, INT_MAX};
    return Cut{-INFINITY, r.Id(TieCut<false>(r, -INFINITY, want - w_finite, sm))};
  }
  double above = 0.0;  // weight of the elements ranked above the candidate range [lo, hi]
  // Each pass keeps one bin; hi and lo always fall in different bins, so the candidate range
  // shrinks to one value within a few passes (64 is a safety bound, never reached for floats).
  for (int iter = 0; iter < 64 && hi != lo; ++iter) {
    const double dhi = hi, scale = kBins / (dhi - static_cast<double>(lo));
    for (int b = threadIdx.x; b < kBins; b += kSampleThreads) {
      sm.hist_cnt[b] = 0;
      sm.hist_w[b] = 0.0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < r.Size(); i += kSampleThreads) {
      const float x = r.Val(i);
      if (!(x >= lo && x <= hi)) continue;
      const int b = Bin(x, dhi, scale);
      atomicAdd(&sm.hist_cnt[b], 1);
      if (kMass) atomicAdd(&sm.hist_w[b], r.Prob(x));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double before = above;
      const int chosen = FirstReaching</*kStrict=*/false>(
          kBins,
          [&](int b, double* w) {
            *w = kMass ? sm.hist_w[b] : static_cast<double>(sm.hist_cnt[b]);
            return sm.hist_cnt[b] != 0;
          },
          above, want, &before);
      sm.bcast_i = chosen;  // short of want (rounding): the last non-empty bin
      sm.bcast_d = before;
    }
    __syncthreads();
    const int chosen = sm.bcast_i;
    above = sm.bcast_d;
    float nlo = INFINITY, nhi = -INFINITY;
    for (int i = threadIdx.x; i < r.Size(); i += kSampleThreads) {
      const float x = r.Val(i);
      if (x >= lo && x <= hi && Bin(x, dhi, scale) == chosen) {
        nlo = fminf(nlo, x);
        nhi = fmaxf(nhi, x);
      }
    }
    lo = BlockMinF(nlo, sm);
    hi = BlockMaxF(nhi, sm);
  }
  return Cut{hi, r.Id(TieCut<kMass>(r, hi, want - above, sm))};
}

// Mass of the view's elements the cut keeps.
template <typename View>
__device__ double MassKept(const View& r, Cut cut, SampleSmem& sm) {
  double s = 0.0;
  for (int i = threadIdx.x; i < r.Size(); i += kSampleThreads) {
    const float x = r.Val(i);
    if (cut.Keeps(x, r.Id(i))) s += r.Prob(x);
  }
  return BlockSumD(s, sm);
}

// Number of the view's elements with pred(value, id) (exact in double).
template <typename View, typename Pred>
__device__ double CountIf(const View& r, Pred pred, SampleSmem& sm) {
  double n = 0.0;
  for (int i = threadIdx.x; i < r.Size(); i += kSampleThreads)
    n += pred(r.Val(i), r.Id(i)) ? 1.0 : 0.0;
  return BlockSumD(n, sm);
}

}  // namespace pkv::gpu::sampling
