#include "kernels/policy/on_start_calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/decode/workspace.h"
#include "kernels/policy/cost_model.h"
#include "kernels/policy/route_policy.h"
#include "kernels/policy/route_timer.h"
#include "kernels/policy/threshold_policy.h"

namespace pkv::policy {
namespace {

using Clock = std::chrono::steady_clock;

// The device buffers of one calibration run; freed on every exit path.
struct Buffers {
  void* k = nullptr;
  void* v = nullptr;
  void* q = nullptr;
  void* out = nullptr;
  int32_t* page_ids = nullptr;
  void* workspace = nullptr;
  uint8_t* image = nullptr;  // pinned plan image
  decode::PlanSizes capacity;
  decode::WorkspaceLayout layout;
  std::unique_ptr<L2Flusher> flusher;
  std::unique_ptr<EventTimer> timer;
  ~Buffers() {
    for (void* p : {k, v, q, out, static_cast<void*>(page_ids), workspace}) cudaFree(p);
    cudaFreeHost(image);
  }
};

int64_t Pages(const std::vector<int32_t>& lengths, int32_t page_size) {
  int64_t pages = 0;
  for (int32_t l : lengths) pages += (l + page_size - 1) / page_size;
  return pages;
}

absl::Status Allocate(const OnStartCalibrationOptions& o, const std::vector<GridCell>& grid,
                      cudaStream_t stream, Buffers* b) {
  const KvShape& s = o.shape;
  int64_t max_pages = 1;
  int32_t max_rows = 1;
  for (const GridCell& c : grid) {
    max_pages = std::max(max_pages, Pages(c.lengths, s.page_size));
    max_rows = std::max(max_rows, static_cast<int32_t>(c.lengths.size()));
  }
  const int64_t kv_elems = max_pages * s.page_elems();
  const int64_t q_elems = int64_t{max_rows} * s.num_q_heads * s.head_dim;
  const bool bf16 = o.dtype == decode::DType::kBFloat16;
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->k, kv_elems * 2));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->v, kv_elems * 2));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->q, q_elems * 2));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->out, q_elems * 2));
  PKV_RETURN_IF_ERROR(FillRandom16(b->k, kv_elems, 11, bf16, stream));
  PKV_RETURN_IF_ERROR(FillRandom16(b->v, kv_elems, 12, bf16, stream));
  PKV_RETURN_IF_ERROR(FillRandom16(b->q, q_elems, 13, bf16, stream));
  // Random, non-contiguous pages: one shuffled permutation of the pool, rows take runs of it.
  std::vector<int32_t> pool(max_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(o.seed));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&b->page_ids), max_pages * 4));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(b->page_ids, pool.data(), max_pages * 4, cudaMemcpyHostToDevice));
  // One workspace large enough for every candidate route (as pkv-bench kernels sizes it).
  for (decode::Route r : kCandidateRoutes) {
    decode::PlanOptions opt;
    opt.route = r;
    const decode::PlanSizes c = decode::CapacityFor(max_rows, s, o.limits, opt);
    b->capacity.items = std::max(b->capacity.items, c.items);
    b->capacity.ctas = std::max(b->capacity.ctas, c.ctas);
    b->capacity.merges = std::max(b->capacity.merges, c.merges);
    b->capacity.partials = std::max(b->capacity.partials, c.partials);
    b->capacity.pairs = std::max(b->capacity.pairs, c.pairs);
  }
  b->layout = decode::LayoutWorkspace(b->capacity, s, nullptr, nullptr);
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->workspace, b->layout.total_bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(b->workspace, 0, b->layout.total_bytes));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&b->image), b->layout.partial_lse));
  PKV_ASSIGN_OR_RETURN(b->flusher, L2Flusher::Create(o.flush_bytes, /*write=*/false));
  PKV_ASSIGN_OR_RETURN(b->timer, EventTimer::Create(o.iters));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// Median GPU time of one route on one cell: plan, then `iters` x (upload, flush, launch).
absl::StatusOr<double> TimeRoute(const OnStartCalibrationOptions& o, const decode::PlanInput& in,
                                 decode::Route route, cudaStream_t stream, Buffers* b,
                                 decode::DecodePlan* plan) {
  decode::PlanOptions opt;
  opt.route = route;
  PKV_RETURN_IF_ERROR(decode::PlanDecode(in, o.limits, opt, plan));
  PKV_RETURN_IF_ERROR(decode::CheckFits(*plan, b->capacity));
  const decode::WorkspaceLayout image =
      decode::LayoutWorkspace(b->capacity, o.shape, plan, b->image);
  decode::DecodeTensors t;
  t.dtype = o.dtype;
  t.q = b->q;
  t.k_cache = b->k;
  t.v_cache = b->v;
  t.page_ids = b->page_ids;
  t.out = b->out;
  const float scale = 1.f / std::sqrt(static_cast<float>(o.shape.head_dim));
  auto upload = [&](int) -> absl::Status {
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b->workspace, b->image, image.upload_bytes,
                                             cudaMemcpyHostToDevice, stream));
    return absl::OkStatus();
  };
  auto launch = [&](int) {
    return decode::LaunchDecode(*plan, b->layout, t, b->workspace, o.config, scale, stream);
  };
  PKV_RETURN_IF_ERROR(upload(0));  // warm-up
  PKV_RETURN_IF_ERROR(launch(0));
  PKV_ASSIGN_OR_RETURN(std::vector<double> us,
                       b->timer->Time(o.iters, b->flusher.get(), stream, upload, launch));
  return Percentile(us, 0.5);
}

void Progress(const OnStartCalibrationOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

}  // namespace

absl::StatusOr<PolicyFile> CalibrateOnDevice(const OnStartCalibrationOptions& o,
                                             cudaStream_t stream) {
  const auto t0 = Clock::now();
  const std::vector<GridCell> grid = ReducedGrid(o.shape, o.max_kv_bytes, o.seed);
  Buffers b;
  PKV_RETURN_IF_ERROR(Allocate(o, grid, stream, &b));
  std::vector<CellTimes> cells;
  decode::DecodePlan plan;
  for (size_t i = 0; i < grid.size(); ++i) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (elapsed > o.budget_s) {
      Progress(o, absl::StrFormat("policy calibration: budget of %.0f s spent after %zu of %zu "
                                  "cells",
                                  o.budget_s, i, grid.size()));
      break;
    }
    const GridCell& g = grid[i];
    std::vector<int32_t> indptr(1, 0);
    for (int32_t l : g.lengths)
      indptr.push_back(indptr.back() + (l + o.shape.page_size - 1) / o.shape.page_size);
    const decode::PlanInput in{g.lengths.data(), indptr.data(),
                               static_cast<int32_t>(g.lengths.size()), o.shape};
    CellTimes cell;
    cell.cell = g.name;
    cell.sm_count = o.limits.num_sms;
    std::string line =
        absl::StrFormat("policy calibration: cell %zu/%zu %s:", i + 1, grid.size(), g.name);
    for (decode::Route r : kCandidateRoutes) {
      PKV_ASSIGN_OR_RETURN(const double us, TimeRoute(o, in, r, stream, &b, &plan));
      cell.gpu_us[static_cast<int>(r)] = us;
      absl::StrAppend(&line, absl::StrFormat(" %s %.1f us", decode::RouteName(r), us));
    }
    // From the lengths, as the worker computes them (the plan's features lack the length shape).
    cell.features =
        SummarizeBatch(g.lengths.data(), static_cast<int32_t>(g.lengths.size()), o.shape, o.limits);
    cells.push_back(std::move(cell));
    Progress(o, absl::StrCat(line, absl::StrFormat(
                                       " (%.1f s)",
                                       std::chrono::duration<double>(Clock::now() - t0).count())));
  }
  if (static_cast<int>(cells.size()) < kMinCells) {
    return absl::DeadlineExceededError(absl::StrCat("policy calibration measured ", cells.size(),
                                                    " cells within ", o.budget_s, " s; need ",
                                                    kMinCells));
  }
  PolicyFile f;
  f.kind = "learned";
  f.gpu_name = o.gpu_name;
  f.num_sms = o.limits.num_sms;
  f.ctas_per_sm = o.limits.ctas_per_sm;
  f.shape = o.shape;
  f.cells = static_cast<int32_t>(cells.size());
  f.source = absl::StrCat("on-start calibration: ", cells.size(), " cells of the reduced grid, ",
                          o.iters, " iterations each");
  PKV_ASSIGN_OR_RETURN(f.threshold, FitThresholdRules(cells, {}));
  f.has_threshold = true;
  PKV_ASSIGN_OR_RETURN(f.learned, FitCostModel(cells, {}, &f.learned_report));
  f.has_learned = true;
  return f;
}

}  // namespace pkv::policy
