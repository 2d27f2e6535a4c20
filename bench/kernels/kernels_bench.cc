#include "bench/kernels/kernels_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"
#include "kernels/decode/workspace.h"

namespace pkv::bench {

using decode::DecodePlan;
using decode::DeviceLimits;

struct KernelsBench::Buffers {
  void* k = nullptr;
  void* v = nullptr;
  void* k8 = nullptr;  // FP8 pages of the same pool (allocated when a variant asks for FP8)
  void* v8 = nullptr;
  void* q = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  int32_t* page_ids = nullptr;
  void* workspace = nullptr;
  decode::PlanSizes capacity;
  decode::WorkspaceLayout layout;
  std::vector<uint8_t*> images;               // pinned, one per step + one for the wall loop
  std::unique_ptr<policy::EventTimer> timer;  // room for iters iterations
  int64_t pool_pages = 0;
  int32_t max_rows = 0;
  std::unique_ptr<L2Flusher> flusher;
  std::vector<int32_t> pool;  // shuffled page ids
};

KernelsBench::KernelsBench(BenchConfig config, cudaStream_t stream)
    : cfg_(std::move(config)), stream_(stream), buf_(new Buffers) {}

KernelsBench::~KernelsBench() {
  for (void* p :
       {buf_->k, buf_->v, buf_->k8, buf_->v8, buf_->q, buf_->out, static_cast<void*>(buf_->lse),
        static_cast<void*>(buf_->page_ids), buf_->workspace}) {
    cudaFree(p);
  }
  for (uint8_t* p : buf_->images) cudaFreeHost(p);
}

KvShape KernelsBench::ShapeFor(const RouteVariant& v) const {
  KvShape s = cfg_.shape;
  s.kv_elem_bytes = IsFp8(v.kv_dtype) ? 1 : 2;
  return s;
}

absl::StatusOr<DeviceLimits> KernelsBench::LimitsFor(const RouteVariant& v) {
  PKV_RETURN_IF_ERROR(decode::ConfigureDecodeKernels(v.config));
  PKV_ASSIGN_OR_RETURN(DeviceLimits limits,
                       decode::QueryDeviceLimits(0, ShapeFor(v), cfg_.dtype, v.config));
  limits.num_sms = cfg_.sm_count;  // the partition's SMs (or the capped count)
  return limits;
}

decode::DecodeTensors KernelsBench::Tensors(const RouteVariant& v) const {
  decode::DecodeTensors t;
  t.dtype = cfg_.dtype;
  t.kv_dtype = v.kv_dtype;
  t.kv_scales = {1.f / 64, 1.f / 64};  // any positive scale: the timing does not depend on it
  t.q = buf_->q;
  t.k_cache = IsFp8(v.kv_dtype) ? buf_->k8 : buf_->k;
  t.v_cache = IsFp8(v.kv_dtype) ? buf_->v8 : buf_->v;
  t.page_ids = buf_->page_ids;
  t.out = buf_->out;
  t.lse = buf_->lse;
  return t;
}

absl::Status KernelsBench::Prepare(const std::vector<TraceLine>& lines) {
  const KvShape& s = cfg_.shape;
  int64_t max_pages = 0;
  for (const TraceLine& l : lines) {
    int64_t pages = 0;
    for (int32_t len : l.lengths) pages += (len + cfg_.steps + s.page_size - 1) / s.page_size;
    max_pages = std::max(max_pages, pages);
    buf_->max_rows = std::max<int32_t>(buf_->max_rows, static_cast<int32_t>(l.lengths.size()));
  }
  Buffers& b = *buf_;
  b.pool_pages = max_pages + max_pages / 16 + 16;
  const int64_t kv_elems = b.pool_pages * s.page_elems();
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.k, kv_elems * 2));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.v, kv_elems * 2));
  const bool bf16 = cfg_.dtype == decode::DType::kBFloat16;
  PKV_RETURN_IF_ERROR(FillRandom16(b.k, kv_elems, 11, bf16, stream_));
  PKV_RETURN_IF_ERROR(FillRandom16(b.v, kv_elems, 12, bf16, stream_));
  if (std::any_of(cfg_.variants.begin(), cfg_.variants.end(),
                  [](const RouteVariant& v) { return IsFp8(v.kv_dtype); })) {
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.k8, kv_elems));
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.v8, kv_elems));
    PKV_RETURN_IF_ERROR(FillRandomFp8(b.k8, kv_elems, 21, stream_));
    PKV_RETURN_IF_ERROR(FillRandomFp8(b.v8, kv_elems, 22, stream_));
  }
  const int64_t q_elems = int64_t{b.max_rows} * s.num_q_heads * s.head_dim;
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.q, q_elems * 2));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.out, q_elems * 2));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMalloc(reinterpret_cast<void**>(&b.lse), int64_t{b.max_rows} * s.num_q_heads * 4));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&b.page_ids), max_pages * 4));
  PKV_RETURN_IF_ERROR(FillRandom16(b.q, q_elems, 13, bf16, stream_));
  b.pool.resize(b.pool_pages);
  std::iota(b.pool.begin(), b.pool.end(), 0);
  // Workspace: the largest capacity any variant may need, laid out once.
  for (const RouteVariant& cv : cfg_.variants) {
    decode::KernelConfig configs[2] = {cv.config, cv.config};
    const int n =
        cv.auto_config ? decode::CandidateKernelConfigs(cv.kv_dtype, s.head_dim, configs) : 1;
    for (int i = 0; i < n; ++i) {
      RouteVariant v = cv;
      v.config = configs[i];
      PKV_ASSIGN_OR_RETURN(DeviceLimits limits, LimitsFor(v));
      decode::PlanOptions opt;
      opt.route = v.route;
      const decode::PlanSizes c = decode::CapacityFor(b.max_rows, s, limits, opt);
      b.capacity.items = std::max(b.capacity.items, c.items);
      b.capacity.ctas = std::max(b.capacity.ctas, c.ctas);
      b.capacity.merges = std::max(b.capacity.merges, c.merges);
      b.capacity.partials = std::max(b.capacity.partials, c.partials);
      b.capacity.pairs = std::max(b.capacity.pairs, c.pairs);
    }
  }
  b.layout = decode::LayoutWorkspace(b.capacity, s, nullptr, nullptr);
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.workspace, b.layout.total_bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(b.workspace, 0, b.layout.total_bytes));
  b.images.resize(cfg_.steps + 1);
  for (auto& img : b.images) {
    PKV_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&img), b.layout.partial_lse));
  }
  PKV_ASSIGN_OR_RETURN(b.timer, policy::EventTimer::Create(cfg_.iters));
  PKV_ASSIGN_OR_RETURN(b.flusher, L2Flusher::Create(cfg_.flush_bytes, cfg_.flush_write));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status KernelsBench::PlanStep(const RouteVariant& v, const DeviceLimits& limits, int step,
                                    bool graph_sized, DecodePlan* plan) {
  step_lengths_.resize(lengths_.size());
  for (size_t r = 0; r < lengths_.size(); ++r) step_lengths_[r] = lengths_[r] + step;
  decode::PlanOptions opt;
  opt.route = v.route;
  opt.merge = v.merge;
  opt.min_split_tokens = cfg_.min_split_tokens;
  opt.workqueue_balanced = cfg_.workqueue_balanced;
  opt.workqueue_quota_chunks = cfg_.workqueue_quota_chunks;
  if (cfg_.cap_grid) opt.max_grid_ctas = limits.slots();
  if (graph_sized) opt.capacity_rows = buf_->max_rows;
  decode::PlanInput in{step_lengths_.data(), page_indptr_.data(),
                       static_cast<int32_t>(lengths_.size()), ShapeFor(v)};
  // The device block table is the pool's first entries (RunLine).
  if (cfg_.page_prefix) in.page_ids = buf_->pool.data();
  return decode::PlanDecode(in, limits, opt, plan);
}

absl::StatusOr<std::vector<RowResult>> KernelsBench::RunLine(const TraceLine& line) {
  Buffers& b = *buf_;
  const KvShape& s = cfg_.shape;
  lengths_ = line.lengths;
  // Random, non-contiguous pages for each row, with room for the decode steps.
  std::mt19937 rng(std::hash<std::string>()(line.name));
  std::shuffle(b.pool.begin(), b.pool.end(), rng);
  page_indptr_.assign(1, 0);
  for (int32_t len : lengths_) {
    page_indptr_.push_back(page_indptr_.back() +
                           (len + cfg_.steps + s.page_size - 1) / s.page_size);
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.page_ids, b.pool.data(), page_indptr_.back() * 4,
                                           cudaMemcpyHostToDevice, stream_));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  std::vector<RowResult> rows;
  fused_out_.clear();
  for (RouteVariant v : cfg_.variants) {
    if (v.auto_config) {  // the worker's per-step choice, from the line's lengths
      double sum = 0, sum_sq = 0;
      for (int32_t len : lengths_) {
        sum += len;
        sum_sq += static_cast<double>(len) * len;
      }
      const double n = std::max<double>(1, lengths_.size()), mean = sum / n;
      const double cv = mean > 0 ? std::sqrt(std::max(0.0, sum_sq / n - mean * mean)) / mean : 0;
      v.config = decode::ChooseKernelConfig(v.kv_dtype, cfg_.shape.head_dim,
                                            static_cast<int32_t>(lengths_.size()), cv);
      v.label =
          absl::StrCat("auto=w", v.config.warps, "s", v.config.stages, IsFp8(v.kv_dtype) ? "/" : "",
                       IsFp8(v.kv_dtype) ? KvCacheDtypeName(v.kv_dtype) : "");
    }
    RowResult row;
    row.trace = line.name;
    row.kind = line.kind;
    row.batch = static_cast<int>(lengths_.size());
    row.sum_len = std::accumulate(lengths_.begin(), lengths_.end(), int64_t{0});
    row.max_len = lengths_.empty() ? 0 : *std::max_element(lengths_.begin(), lengths_.end());
    row.route = std::string(decode::RouteName(v.route));
    row.variant = v.label;
    PKV_RETURN_IF_ERROR(RunVariant(line, v, &row));
    rows.push_back(std::move(row));
  }
  return rows;
}

// Step-0 output of this variant (already in b.out) against the fused route's.
absl::Status KernelsBench::CheckAgainstFused(const RouteVariant& v, RowResult* row) {
  const int64_t n = int64_t{row->batch} * cfg_.shape.num_q_heads * cfg_.shape.head_dim;
  std::vector<uint16_t> out(n);
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.data(), buf_->out, n * 2, cudaMemcpyDeviceToHost, stream_));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  std::vector<uint16_t>& fused = fused_out_[v.kv_dtype];
  if (fused.empty() && v.route == decode::Route::kFused) fused = out;
  if (fused.empty()) return absl::OkStatus();
  const bool bf = cfg_.dtype == decode::DType::kBFloat16;
  double diff = std::max(0.0, row->max_diff_vs_fused);
  for (int64_t i = 0; i < n; ++i) {
    const float a = bf ? ToFloat(BFloat16{out[i]}) : ToFloat(Half{out[i]});
    const float c = bf ? ToFloat(BFloat16{fused[i]}) : ToFloat(Half{fused[i]});
    diff = std::isnan(a) || std::isnan(c) ? INFINITY : std::max<double>(diff, std::fabs(a - c));
  }
  row->max_diff_vs_fused = diff;
  return absl::OkStatus();
}

// Median GPU time of a CUDA graph holding the step's launches, captured once for a graph-sized
// plan and replayed after uploading each step's plan (the upload is outside the events).
absl::Status KernelsBench::TimeGraph(const RouteVariant& v, const DeviceLimits& limits, float scale,
                                     RowResult* row) {
  Buffers& b = *buf_;
  std::vector<DecodePlan> plans(cfg_.steps);
  std::vector<decode::WorkspaceLayout> lays(cfg_.steps);
  for (int st = 0; st < cfg_.steps; ++st) {
    PKV_RETURN_IF_ERROR(PlanStep(v, limits, st, true, &plans[st]));
    PKV_RETURN_IF_ERROR(decode::CheckFits(plans[st], b.capacity));
    lays[st] = decode::LayoutWorkspace(b.capacity, ShapeFor(v), &plans[st], b.images[st]);
  }
  auto upload = [&](int st) {
    return decode::UploadPlan(b.images[st], lays[st], false, b.workspace, stream_);
  };
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const absl::Status launched =
      decode::LaunchDecode(plans[0], b.layout, Tensors(v), b.workspace, v.config, scale, stream_);
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream_, &graph));
  PKV_RETURN_IF_ERROR(launched);
  PKV_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec, graph, 0));
  for (int st = cfg_.steps - 1; st >= 0; --st) {  // warm up; ends with step 0 for the check
    PKV_RETURN_IF_ERROR(upload(st));
    PKV_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream_));
  }
  PKV_RETURN_IF_ERROR(CheckAgainstFused(v, row));
  absl::StatusOr<std::vector<double>> t = b.timer->Time(
      cfg_.iters, b.flusher.get(), stream_, [&](int it) { return upload(it % cfg_.steps); },
      [&](int) -> absl::Status {
        PKV_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream_));
        return absl::OkStatus();
      });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  PKV_RETURN_IF_ERROR(t.status());
  row->graph_us = Percentile(*t, 0.5);
  return absl::OkStatus();
}

absl::Status KernelsBench::RunVariant(const TraceLine& line, const RouteVariant& v,
                                      RowResult* row) {
  Buffers& b = *buf_;
  PKV_ASSIGN_OR_RETURN(DeviceLimits limits, LimitsFor(v));
  const float scale = 1.f / std::sqrt(static_cast<float>(cfg_.shape.head_dim));
  std::vector<DecodePlan> plans(cfg_.steps);
  std::vector<decode::WorkspaceLayout> lays(cfg_.steps);
  double kv_bytes = 0;
  for (int st = 0; st < cfg_.steps; ++st) {
    PKV_RETURN_IF_ERROR(PlanStep(v, limits, st, false, &plans[st]));
    PKV_RETURN_IF_ERROR(decode::CheckFits(plans[st], b.capacity));
    lays[st] = decode::LayoutWorkspace(b.capacity, ShapeFor(v), &plans[st], b.images[st]);
    kv_bytes += static_cast<double>(plans[st].counters.kv_bytes) / cfg_.steps;
  }
  auto launch = [&](int st) -> absl::Status {
    PKV_RETURN_IF_ERROR(decode::UploadPlan(b.images[st], lays[st], false, b.workspace, stream_));
    return decode::LaunchDecode(plans[st], b.layout, Tensors(v), b.workspace, v.config, scale,
                                stream_);
  };
  // Warm-up, ending with step 0 for the correctness cross-check against the fused route.
  for (int st = std::min(cfg_.steps, 3) - 1; st >= 0; --st) PKV_RETURN_IF_ERROR(launch(st));
  PKV_RETURN_IF_ERROR(CheckAgainstFused(v, row));
  // GPU time: events around the launch only, L2 flushed before each iteration.
  PKV_ASSIGN_OR_RETURN(
      const std::vector<double> gpu,
      b.timer->Time(
          cfg_.iters, b.flusher.get(), stream_,
          [&](int it) {
            const int st = it % cfg_.steps;
            return decode::UploadPlan(b.images[st], lays[st], false, b.workspace, stream_);
          },
          [&](int it) {
            return decode::LaunchDecode(plans[it % cfg_.steps], b.layout, Tensors(v), b.workspace,
                                        v.config, scale, stream_);
          }));
  // Wall time: plan + fill + upload + launch + synchronise, from a cold L2.
  std::vector<double> wall, plan_us;
  DecodePlan scratch;
  uint8_t* image = b.images[cfg_.steps];
  for (int it = 0; it < cfg_.wall_iters; ++it) {
    const int st = it % cfg_.steps;
    PKV_RETURN_IF_ERROR(b.flusher->Flush(stream_));
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    const auto t0 = std::chrono::steady_clock::now();
    PKV_RETURN_IF_ERROR(PlanStep(v, limits, st, false, &scratch));
    const decode::WorkspaceLayout lay =
        decode::LayoutWorkspace(b.capacity, ShapeFor(v), &scratch, image);
    PKV_RETURN_IF_ERROR(decode::UploadPlan(image, lay, false, b.workspace, stream_));
    PKV_RETURN_IF_ERROR(
        decode::LaunchDecode(scratch, b.layout, Tensors(v), b.workspace, v.config, scale, stream_));
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    wall.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    plan_us.push_back(scratch.counters.plan_us);
  }
  row->gpu_us = Percentile(gpu, 0.5);
  row->gpu_us_p10 = Percentile(gpu, 0.1);
  row->gpu_us_p90 = Percentile(gpu, 0.9);
  row->wall_us = Percentile(wall, 0.5);
  row->kv_bytes = kv_bytes;
  row->gbps = kv_bytes / (row->gpu_us * 1e-6) / 1e9;
  row->frac_bw = cfg_.stream_gbps > 0 ? row->gbps / cfg_.stream_gbps : 0;
  row->counters = plans[0].counters;
  row->counters.plan_us = Percentile(plan_us, 0.5);
  row->features = plans[0].features;
  if (cfg_.graph && v.route != decode::Route::kBucketedExact) {
    const absl::Status g = TimeGraph(v, limits, scale, row);
    if (!g.ok()) {  // a graph problem must not cost the row its other measurements
      std::fprintf(stderr, "# %s %s: graph timing failed: %s\n", line.name.c_str(),
                   row->route.c_str(), std::string(g.message()).c_str());
      row->graph_us = -1;
      cudaGetLastError();
    }
  }
  return absl::OkStatus();
}

}  // namespace pkv::bench
