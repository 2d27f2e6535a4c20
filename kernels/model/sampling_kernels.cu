// The sampling kernel (see sampling.h for the rule and the search it uses).
#include <climits>
#include <cmath>

#include "common/status_macros.h"
#include "kernels/model/model_device.cuh"
#include "kernels/model/sampling.h"
#include "kernels/model/sampling_block.cuh"

namespace pkv::gpu::sampling {
namespace {

template <bool kMass>
__device__ __forceinline__ double Weight(const RowView& r, float x) {
  return kMass ? r.Prob(x) : 1.0;
}

// Among the tokens whose value is exactly v, in ascending id order, the first id at which the
// running weight reaches `needed`; the last such id when rounding leaves it short.
template <bool kMass>
__device__ int TieCut(const RowView& r, float v, double needed, SampleSmem& sm) {
  int b, e;
  ChunkRange(r.vocab, &b, &e);
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
template <bool kMass>
__device__ Cut SelectCut(const RowView& r, double want, SampleSmem& sm) {
  float lo = INFINITY, hi = -INFINITY;
  double w_finite = 0.0;
  for (int i = threadIdx.x; i < r.vocab; i += kSampleThreads) {
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
    if (kMass) return Cut{-INFINITY, r.vocab - 1};
    return Cut{-INFINITY, TieCut<false>(r, -INFINITY, want - w_finite, sm)};
  }
  double above = 0.0;  // weight of the tokens ranked above the candidate range [lo, hi]
  // Each pass keeps one bin; hi and lo always fall in different bins, so the candidate range
  // shrinks to one value within a few passes (64 is a safety bound, never reached for floats).
  for (int iter = 0; iter < 64 && hi != lo; ++iter) {
    const double dhi = hi, scale = kBins / (dhi - static_cast<double>(lo));
    for (int b = threadIdx.x; b < kBins; b += kSampleThreads) {
      sm.hist_cnt[b] = 0;
      sm.hist_w[b] = 0.0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < r.vocab; i += kSampleThreads) {
      const float x = r.Val(i);
      if (!(x >= lo && x <= hi)) continue;
      const int b = Bin(x, dhi, scale);
      atomicAdd(&sm.hist_cnt[b], 1);
      if (kMass) atomicAdd(&sm.hist_w[b], r.Prob(x));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double cum = above, last_cum = above;
      int chosen = -1, last = -1;
      for (int b = 0; b < kBins; ++b) {
        if (sm.hist_cnt[b] == 0) continue;
        const double w = kMass ? sm.hist_w[b] : static_cast<double>(sm.hist_cnt[b]);
        last = b;
        last_cum = cum;
        if (cum + w >= want) {
          chosen = b;
          break;
        }
        cum += w;
      }
      if (chosen < 0) {  // rounding: the histogram's total fell short of w_finite
        chosen = last;
        cum = last_cum;
      }
      sm.bcast_i = chosen;
      sm.bcast_d = cum;
    }
    __syncthreads();
    const int chosen = sm.bcast_i;
    above = sm.bcast_d;
    float nlo = INFINITY, nhi = -INFINITY;
    for (int i = threadIdx.x; i < r.vocab; i += kSampleThreads) {
      const float x = r.Val(i);
      if (x >= lo && x <= hi && Bin(x, dhi, scale) == chosen) {
        nlo = fminf(nlo, x);
        nhi = fmaxf(nhi, x);
      }
    }
    lo = BlockMinF(nlo, sm);
    hi = BlockMaxF(nhi, sm);
  }
  return Cut{hi, TieCut<kMass>(r, hi, want - above, sm)};
}

__device__ double MassKept(const RowView& r, Cut cut, SampleSmem& sm) {
  double s = 0.0;
  for (int i = threadIdx.x; i < r.vocab; i += kSampleThreads) {
    const float x = r.Val(i);
    if (cut.Keeps(x, i)) s += r.Prob(x);
  }
  return BlockSumD(s, sm);
}

template <typename Pred>
__device__ double CountIf(const RowView& r, Pred pred, SampleSmem& sm) {
  double n = 0.0;
  for (int i = threadIdx.x; i < r.vocab; i += kSampleThreads) n += pred(r.Val(i), i) ? 1.0 : 0.0;
  return BlockSumD(n, sm);
}

// Step 5's walk over ids [first, last) of the row: the first kept id at which the running mass
// exceeds `target` (mass before `first` already subtracted); when rounding leaves the target at
// the very top, the last kept id with mass.
__device__ int WalkIds(const RowView& r, Cut cut, int first, int last, double target,
                       SampleSmem& sm) {
  int b, e;
  ChunkRange(last - first, &b, &e);
  b += first;
  e += first;
  double s = 0.0;
  for (int i = b; i < e; ++i) {
    const float x = r.Val(i);
    if (cut.Keeps(x, i)) s += r.Prob(x);
  }
  const double excl = BlockExclusiveScan(s, sm);
  if (threadIdx.x == 0) sm.bcast_i = INT_MAX;
  __syncthreads();
  if (excl <= target && excl + s > target) {
    double cum = excl;
    for (int i = b; i < e; ++i) {
      const float x = r.Val(i);
      if (!cut.Keeps(x, i)) continue;
      cum += r.Prob(x);
      if (cum > target) {
        atomicMin(&sm.bcast_i, i);
        break;
      }
    }
  }
  __syncthreads();
  const int chosen = sm.bcast_i;
  if (chosen != INT_MAX) return chosen;
  int top = -1;
  for (int i = b; i < e; ++i) {
    const float x = r.Val(i);
    if (cut.Keeps(x, i) && r.Prob(x) > 0.0) top = i;
  }
  return BlockMaxI(top, sm);
}

// The unfiltered draw (every token kept): the chunk whose mass holds u * total, from the
// pre-pass's chunk masses in id order, then the walk inside that chunk only.
__device__ int DrawUnfiltered(const RowView& r, const SampleRowParams& p,
                              const SampleChunkPartial* part, double total, SampleSmem& sm) {
  const double target = CounterUniform(p.seed, static_cast<uint64_t>(p.sample_index)) * total;
  if (threadIdx.x == 0) {
    double cum = 0.0, last_cum = 0.0;
    int chosen = -1, last = -1;
    for (int c = 0; c < kSampleChunks; ++c) {
      const double m = part[c].mass;
      if (!(m > 0.0)) continue;
      last = c;
      last_cum = cum;
      if (cum + m > target) {
        chosen = c;
        break;
      }
      cum += m;
    }
    if (chosen < 0) {  // rounding: the chunks' total fell short of the target
      chosen = last;
      cum = last_cum;
    }
    sm.bcast_i = chosen;
    sm.bcast_d = cum;
  }
  __syncthreads();
  const int c = sm.bcast_i;  // >= 0: the max's chunk has mass 1
  const double before = sm.bcast_d;
  int first, last;
  SampleChunkOf(r.vocab, c, &first, &last);
  return WalkIds(r, Cut{-INFINITY, r.vocab - 1}, first, last, target - before, sm);
}

// Steps 2-5 of sampler.h: the kept prefix, then the id-ordered draw.
__device__ int Draw(const RowView& r, const SampleRowParams& p, double total_mass, SampleSmem& sm) {
  Cut cut{-INFINITY, r.vocab - 1};
  double n = r.vocab, mass = total_mass;
  if (p.top_k > 0 && p.top_k < r.vocab) {
    cut = SelectCut<false>(r, p.top_k, sm);
    n = p.top_k;
    mass = MassKept(r, cut, sm);
  }
  if (p.top_p < 1.f) {
    const Cut cp = SelectCut<true>(r, static_cast<double>(p.top_p) * mass, sm);
    const double np = CountIf(
        r, [&](float x, int i) { return cp.Keeps(x, i); }, sm);
    if (np < n) {
      n = np;
      cut = cp;
    }
  }
  if (p.min_p > 0.f) {
    const double min_p = p.min_p;
    const double c = fmax(1.0, CountIf(
                                   r, [&](float x, int) { return r.Prob(x) >= min_p; }, sm));
    if (c < n) cut = SelectCut<false>(r, c, sm);
  }
  const double target =
      CounterUniform(p.seed, static_cast<uint64_t>(p.sample_index)) * MassKept(r, cut, sm);
  return WalkIds(r, cut, 0, r.vocab, target, sm);
}

// The n most likely tokens, most likely first (ties: lower id), as log-probabilities.
__device__ int TopLogprobs(const RowView& r, int n, double log_z, SampleSmem& sm, TopLogprob* out) {
  const Cut cut = SelectCut<false>(r, n, sm);
  if (threadIdx.x == 0) sm.top_n = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < r.vocab; i += kSampleThreads) {
    const float x = r.Val(i);
    if (!cut.Keeps(x, i)) continue;
    const int slot = atomicAdd(&sm.top_n, 1);
    if (slot < kMaxTopLogprobs) {
      sm.top_ids[slot] = i;
      sm.top_vals[slot] = x;
    }
  }
  __syncthreads();
  const int count = min(sm.top_n, kMaxTopLogprobs);
  if (threadIdx.x == 0) {
    for (int a = 1; a < count; ++a) {  // insertion sort: at most kMaxTopLogprobs entries
      const int id = sm.top_ids[a];
      const float v = sm.top_vals[a];
      int j = a - 1;
      while (j >= 0 && (sm.top_vals[j] < v || (sm.top_vals[j] == v && sm.top_ids[j] > id))) {
        sm.top_ids[j + 1] = sm.top_ids[j];
        sm.top_vals[j + 1] = sm.top_vals[j];
        --j;
      }
      sm.top_ids[j + 1] = id;
      sm.top_vals[j + 1] = v;
    }
    for (int j = 0; j < count; ++j) {
      const float v = sm.top_vals[j];
      const double lp = v == -INFINITY ? -INFINITY : __dsub_rn(r.Z(v), log_z);
      out[j] = TopLogprob{sm.top_ids[j], static_cast<float>(lp)};
    }
  }
  return count;
}

__device__ __forceinline__ RowView RowOf(const SampleArgs& a, int row, const SampleRowParams& p) {
  const bool greedy = p.temperature <= 0.f;
  return RowView{a.logits + static_cast<int64_t>(row) * a.vocab, a.vocab,
                 greedy ? 1.0 : 1.0 / static_cast<double>(p.temperature), 0.0};
}

__device__ __forceinline__ bool NeedsMass(const SampleRowParams& p) {
  return p.temperature > 0.f || p.logprobs;
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

// Pre-pass 1, grid (kSampleChunks, max_rows): each chunk's arg max.
__global__ void __launch_bounds__(kSampleThreads) ChunkArgMaxKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  const int row = blockIdx.y;
  if (row >= *a.num_rows) return;
  const RowView r = RowOf(a, row, a.params[row]);
  int first, last;
  SampleChunkOf(r.vocab, blockIdx.x, &first, &last);
  float best = -INFINITY;
  int best_id = INT_MAX;
  for (int i = first + threadIdx.x; i < last; i += kSampleThreads) {
    const float x = r.Val(i);
    if (x > best || (x == best && i < best_id)) {
      best = x;
      best_id = i;
    }
  }
  BlockArgMax(&best, &best_id, sm);
  if (threadIdx.x == 0) {
    SampleChunkPartial& out = a.partials[int64_t{row} * kSampleChunks + blockIdx.x];
    out.best = best;
    out.best_id = best_id;
    out.mass = 0.0;
  }
}

// Pre-pass 2, grid (kSampleChunks, max_rows): each chunk's probability mass under the row's max
// (rows that need no probabilities, greedy without logprobs, skip it).
__global__ void __launch_bounds__(kSampleThreads) ChunkMassKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  const int row = blockIdx.y;
  if (row >= *a.num_rows) return;
  const SampleRowParams p = a.params[row];
  if (!NeedsMass(p)) return;
  RowView r = RowOf(a, row, p);
  SampleChunkPartial* part = a.partials + int64_t{row} * kSampleChunks;
  float best;
  int best_id;
  RowArgMax(part, &best, &best_id);
  if (isinf(best)) return;  // reported by the row's kernel
  r.zmax = r.Z(best);
  int first, last;
  SampleChunkOf(r.vocab, blockIdx.x, &first, &last);
  double s = 0.0;
  for (int i = first + threadIdx.x; i < last; i += kSampleThreads) s += r.Prob(r.Val(i));
  s = BlockSumD(s, sm);
  if (threadIdx.x == 0) part[blockIdx.x].mass = s;
}

__global__ void __launch_bounds__(kSampleThreads) SampleKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  const int row = blockIdx.x;
  if (row >= *a.num_rows) return;
  const SampleRowParams p = a.params[row];
  const bool greedy = p.temperature <= 0.f;
  RowView r = RowOf(a, row, p);
  const SampleChunkPartial* part = a.partials + int64_t{row} * kSampleChunks;
  float best;
  int best_id;
  RowArgMax(part, &best, &best_id);
  SampleRowResult* res = a.results + row;
  if (isinf(best)) {  // all -inf / NaN, or a +inf logit: the CPU sampler rejects both
    if (threadIdx.x == 0) *res = SampleRowResult{-1, 0.f, kSampleBadLogits, 0};
    return;
  }
  r.zmax = r.Z(best);
  double log_z = 0.0, total = 0.0;
  if (NeedsMass(p)) {
    for (int c = 0; c < kSampleChunks; ++c) total += part[c].mass;
    log_z = r.zmax + log(total);
  }
  const bool filtered = (p.top_k > 0 && p.top_k < r.vocab) || p.top_p < 1.f || p.min_p > 0.f;
  const int chosen = greedy     ? best_id
                     : filtered ? Draw(r, p, total, sm)
                                : DrawUnfiltered(r, p, part, total, sm);
  int num_top = 0;
  if (p.logprobs && p.top_logprobs > 0) {
    const int n = min(min(p.top_logprobs, kMaxTopLogprobs), r.vocab);
    num_top = TopLogprobs(r, n, log_z, sm, a.top + static_cast<int64_t>(row) * kMaxTopLogprobs);
  }
  if (threadIdx.x == 0) {
    const float lp = p.logprobs ? static_cast<float>(__dsub_rn(r.Z(r.Val(chosen)), log_z)) : 0.f;
    *res = SampleRowResult{chosen, lp, kSampleOk, num_top};
  }
}

}  // namespace
}  // namespace pkv::gpu::sampling

namespace pkv::gpu {

absl::Status LaunchSample(const SampleArgs& a, cudaStream_t stream) {
  if (a.vocab <= 0 || a.logits == nullptr || a.params == nullptr || a.num_rows == nullptr ||
      a.results == nullptr || a.top == nullptr || a.partials == nullptr) {
    return absl::InvalidArgumentError("sampling: empty vocabulary or null buffer");
  }
  if (a.max_rows <= 0) return absl::OkStatus();
  const dim3 chunks(kSampleChunks, a.max_rows);
  sampling::ChunkArgMaxKernel<<<chunks, sampling::kSampleThreads, 0, stream>>>(a);
  PKV_RETURN_IF_ERROR(CheckLaunch("ChunkArgMaxKernel"));
  sampling::ChunkMassKernel<<<chunks, sampling::kSampleThreads, 0, stream>>>(a);
  PKV_RETURN_IF_ERROR(CheckLaunch("ChunkMassKernel"));
  sampling::SampleKernel<<<a.max_rows, sampling::kSampleThreads, 0, stream>>>(a);
  return CheckLaunch("SampleKernel");
}

}  // namespace pkv::gpu
