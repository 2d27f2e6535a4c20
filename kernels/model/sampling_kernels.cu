// The sampling kernel (see sampling.h for the rule and the search it uses).
#include <climits>
#include <cmath>

#include "common/status_macros.h"
#include "kernels/model/model_device.cuh"
#include "kernels/model/sampling.h"
#include "kernels/model/sampling_block.cuh"
#include "kernels/model/sampling_filter.cuh"
#include "kernels/model/sampling_select.cuh"

namespace pkv::gpu::sampling {
namespace {

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

// Step 5 from per-chunk kept masses (chunk_mass(c), id order; `total` their sum): the chunk whose
// mass holds u * total, then the walk inside that chunk only.
template <typename ChunkMass>
__device__ int DrawInChunk(const RowView& r, const SampleRowParams& p, Cut cut,
                           ChunkMass chunk_mass, double total, SampleSmem& sm) {
  const double target = CounterUniform(p.seed, static_cast<uint64_t>(p.sample_index)) * total;
  if (threadIdx.x == 0) {
    double before = 0.0;
    sm.bcast_i = FirstReaching</*kStrict=*/true>(
        kSampleChunks,
        [&](int c, double* m) {
          *m = chunk_mass(c);
          return *m > 0.0;
        },
        0.0, target, &before);  // short of the target (rounding): the last chunk with mass
    sm.bcast_d = before;
  }
  __syncthreads();
  const int c = sm.bcast_i;  // >= 0: the max's chunk has mass 1 and the max is always kept
  const double before = sm.bcast_d;
  int first, last;
  SampleChunkOf(r.vocab, c, &first, &last);
  return WalkIds(r, cut, first, last, target - before, sm);
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

// Steps 2-5 among the plan's candidates (sampling.h): the same searches as Draw's over <=
// kMaxSampleCandidates tokens. Every token ranked above them is kept, so each search's target is
// shifted by their exact count or mass; a cut that would not fall among the candidates (the
// plan's float masses were off by more than its margin) returns -1 and the caller searches the
// whole row.
__device__ int DrawCandidates(const RowView& r, const SampleRowParams& p, const SamplePlan& plan,
                              const SampleCandidate* cands, const SampleChunkPartial* part,
                              double total, CandSmem& cs, SampleSmem& sm) {
  const int n_c = plan.cand_indptr[kSampleChunks];
  for (int j = threadIdx.x; j < n_c; j += kSampleThreads) {
    const SampleCandidate c = cands[j];
    cs.vals[j] = c.value;
    cs.ids[j] = c.id;
  }
  __syncthreads();
  const CandView cv{cs.vals, cs.ids, n_c, r};
  double above = 0.0;  // exact: the compaction's fixed-order sums, in chunk order
  for (int c = 0; c < kSampleChunks; ++c) above += part[c].above;
  const int n_above = plan.num_above;
  Cut cut{-INFINITY, INT_MAX};
  bool inside = false;  // the cut so far lies among the candidates
  double n = r.vocab, mass = total;
  if (plan.filters & kSampleFilterTopK) {
    const int j = p.top_k - n_above;
    if (j < 1) return -1;
    n = p.top_k;
    if (j <= n_c) {
      cut = SelectCut<false>(cv, j, sm);
      mass = above + MassKept(cv, cut, sm);
      inside = true;
    } else if (plan.filters & kSampleFilterTopP) {
      return -1;  // top-p needs the top-k mass
    }  // else the k-th token lies below the candidates: min-p cuts first (the plan's bins)
  }
  if (plan.filters & kSampleFilterTopP) {
    const double want = static_cast<double>(p.top_p) * mass - above;
    if (!(want > 0.0)) return -1;
    // When the candidates do not reach `want`, the top-p prefix ends below them: min-p cuts first.
    if (want <= MassKept(cv, cut, sm)) {
      const Cut cp = SelectCut<true>(cv, want, sm);
      const double np = n_above + CountIf(
                                      cv, [&](float x, int id) { return cp.Keeps(x, id); }, sm);
      if (np < n) {
        n = np;
        cut = cp;
        inside = true;
      }
    }
  }
  if ((plan.filters & kSampleFilterMinP) && plan.num_min_p < n) {
    const int j = plan.num_min_p - n_above;
    if (j < 1 || j > n_c) return -1;
    cut = SelectCut<false>(cv, j, sm);
    inside = true;
  }
  if (!inside) return -1;
  // Each chunk's kept mass: warp w sums chunks w, w + 16 (fixed lanes, fixed shuffle order).
  for (int c = Warp(); c < kSampleChunks; c += kSampleWarps) {
    double s = 0.0;
    for (int j = plan.cand_indptr[c] + Lane(); j < plan.cand_indptr[c + 1]; j += 32) {
      if (cut.Keeps(cv.Val(j), cv.Id(j))) s += cv.Prob(cv.Val(j));
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
    if (Lane() == 0) sm.chunk_kept[c] = part[c].above + s;
  }
  __syncthreads();
  double kept = 0.0;
  for (int c = 0; c < kSampleChunks; ++c) kept += sm.chunk_kept[c];
  return DrawInChunk(
      r, p, cut, [&](int c) { return sm.chunk_kept[c]; }, kept, sm);
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

// Pre-pass 1, grid (kSampleChunks, max_rows): each chunk's arg max.
__global__ void __launch_bounds__(kSampleThreads) ChunkArgMaxKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  const int row = blockIdx.y;
  if (row >= *a.num_rows) return;
  const RowView r = RowOf(a, row, a.params[row]);
  int first, last;
  SampleChunkOf(r.vocab, blockIdx.x, &first, &last);
  float best = -INFINITY, lo = INFINITY;
  int best_id = INT_MAX;
  for (int i = first + threadIdx.x; i < last; i += kSampleThreads) {
    const float x = r.Val(i);
    if (x > best || (x == best && i < best_id)) {
      best = x;
      best_id = i;
    }
    if (x != -INFINITY) lo = fminf(lo, x);
  }
  BlockArgMax(&best, &best_id, sm);
  lo = BlockMinF(lo, sm);
  if (threadIdx.x == 0) {
    SampleChunkPartial& out = ScratchOf(a).partials[int64_t{row} * kSampleChunks + blockIdx.x];
    out = SampleChunkPartial{best, best_id, 0.0, lo, 0, 0.0};
  }
}

// Pre-pass 2, grid (kSampleChunks, max_rows): each chunk's probability mass under the row's max
// (rows that need no probabilities, greedy without logprobs, skip it); for filtered rows also the
// chunk's histogram (Binning; counts and float masses by shared-memory atomics, native for int
// and float) and its count of tokens with p >= min_p.
__global__ void __launch_bounds__(kSampleThreads) ChunkMassKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  const int row = blockIdx.y;
  if (row >= *a.num_rows) return;
  const SampleRowParams p = a.params[row];
  if (!NeedsMass(p)) return;
  RowView r = RowOf(a, row, p);
  const SampleScratch ws = ScratchOf(a);
  SampleChunkPartial* part = ws.partials + int64_t{row} * kSampleChunks;
  float best;
  int best_id;
  RowArgMax(part, &best, &best_id);
  if (isinf(best)) return;  // reported by the row's kernel
  r.zmax = r.Z(best);
  int first, last;
  SampleChunkOf(r.vocab, blockIdx.x, &first, &last);
  double s = 0.0;
  if (!Filtered(p, r.vocab)) {
    for (int i = first + threadIdx.x; i < last; i += kSampleThreads) s += r.Prob(r.Val(i));
    s = BlockSumD(s, sm);
    if (threadIdx.x == 0) part[blockIdx.x].mass = s;
    return;
  }
  const Binning bins = BinningOf(r, p, part, best);
  for (int b = threadIdx.x; b < kSampleBins; b += kSampleThreads) {
    sm.hist_cnt[b] = 0;
    sm.hist_wf[b] = 0.f;
  }
  __syncthreads();
  const double min_p = p.min_p;
  // The bin below the binned range is counted in registers: with a bound (min-p, or top-p on a
  // peaked row) most of the row lands there, and atomics on one shared address serialise.
  constexpr int kBelow = kSampleBins - 1;
  int num_min_p = 0, num_below = 0;
  double w_below = 0.0;
  for (int i = first + threadIdx.x; i < last; i += kSampleThreads) {
    const float x = r.Val(i);
    if (x == -INFINITY) continue;
    const double px = r.Prob(x);
    s += px;
    num_min_p += min_p > 0.0 && px >= min_p;
    const int b = bins.Of(x);
    if (b == kBelow) {
      ++num_below;
      w_below += px;
      continue;
    }
    atomicAdd(&sm.hist_cnt[b], 1);
    atomicAdd(&sm.hist_wf[b], static_cast<float>(px));
  }
  s = BlockSumD(s, sm);
  w_below = BlockSumD(w_below, sm);
  const auto add = [](int x, int y) { return x + y; };
  num_min_p = BlockReduce(num_min_p, add, sm.ired);
  num_below = BlockReduce(num_below, add, sm.ired);
  if (threadIdx.x == 0) {
    sm.hist_cnt[kBelow] = num_below;
    sm.hist_wf[kBelow] = static_cast<float>(w_below);
  }
  __syncthreads();
  SampleHistBin* h = ws.hist + (int64_t{row} * kSampleChunks + blockIdx.x) * kSampleBins;
  for (int b = threadIdx.x; b < kSampleBins; b += kSampleThreads) {
    h[b] = SampleHistBin{sm.hist_cnt[b], sm.hist_wf[b]};
  }
  if (threadIdx.x == 0) {
    part[blockIdx.x].mass = s;
    part[blockIdx.x].num_min_p = num_min_p;
  }
}

__global__ void __launch_bounds__(kSampleThreads) SampleKernel(const SampleArgs a) {
  __shared__ SampleSmem sm;
  __shared__ CandSmem cs;
  const int row = blockIdx.x;
  if (row >= *a.num_rows) return;
  const SampleRowParams p = a.params[row];
  const bool greedy = p.temperature <= 0.f;
  RowView r = RowOf(a, row, p);
  const SampleScratch ws = ScratchOf(a);
  const SampleChunkPartial* part = ws.partials + int64_t{row} * kSampleChunks;
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
  int chosen = best_id;
  if (!greedy) {
    const SamplePlan& plan = ws.plans[row];
    const int mode = Filtered(p, r.vocab) ? plan.mode : kSamplePlanNone;
    chosen = -1;
    if (mode == kSamplePlanNone) {
      chosen = DrawInChunk(
          r, p, Cut{-INFINITY, INT_MAX}, [&](int c) { return part[c].mass; }, total, sm);
    } else if (mode == kSamplePlanCandidates && !plan.mismatch) {
      const SampleCandidate* cands = ws.candidates + int64_t{row} * kMaxSampleCandidates;
      chosen = DrawCandidates(r, p, plan, cands, part, total, cs, sm);
    }
    if (chosen < 0) chosen = Draw(r, p, total, sm);  // the whole-row search
  }
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
      a.results == nullptr || a.top == nullptr || a.workspace == nullptr) {
    return absl::InvalidArgumentError("sampling: empty vocabulary or null buffer");
  }
  if (a.max_rows <= 0) return absl::OkStatus();
  const dim3 chunks(kSampleChunks, a.max_rows);
  sampling::ChunkArgMaxKernel<<<chunks, sampling::kSampleThreads, 0, stream>>>(a);
  PKV_RETURN_IF_ERROR(CheckLaunch("ChunkArgMaxKernel"));
  sampling::ChunkMassKernel<<<chunks, sampling::kSampleThreads, 0, stream>>>(a);
  PKV_RETURN_IF_ERROR(CheckLaunch("ChunkMassKernel"));
  sampling::SamplePlanKernel<<<a.max_rows, sampling::kSampleThreads, 0, stream>>>(a);
  PKV_RETURN_IF_ERROR(CheckLaunch("SamplePlanKernel"));
  sampling::SampleCompactKernel<<<chunks, sampling::kSampleThreads, 0, stream>>>(a);
  PKV_RETURN_IF_ERROR(CheckLaunch("SampleCompactKernel"));
  sampling::SampleKernel<<<a.max_rows, sampling::kSampleThreads, 0, stream>>>(a);
  return CheckLaunch("SampleKernel");
}

}  // namespace pkv::gpu
