#include "worker/cuda_backend/packed_linear.h"

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/model/gemv.h"
#include "kernels/model/qgemm.h"

namespace pkv::cuda_backend {

absl::StatusOr<PackedLinear> PackedLinear::SetUp(const DeviceWeights& weights, int device,
                                                 cudaStream_t stream) {
  PackedLinear p;
  if (weights.dequant_scratch_bytes == 0) return p;  // nothing is packed
  PKV_ASSIGN_OR_RETURN(p.device_, gpu::QueryQGemmDevice(device));
  PKV_ASSIGN_OR_RETURN(p.tickets_, DeviceBuffer::Allocate(int64_t{kMaxTickets} * 4));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p.tickets_.get(), 0, int64_t{kMaxTickets} * 4, stream));
  return p;
}

absl::Status PackedLinear::Enqueue(const DeviceWeights& weights, const void* x, int64_t tokens,
                                   const ProjectionWeights& w, void* y, bool y_f32, bool pdl,
                                   Gemm& gemm, cudaStream_t stream) const {
  if (tokens == 0) return absl::OkStatus();
  // Deterministic mode (gemm.fixed_rows() > 0): always dequantize + the fixed-row GEMM, whose
  // per-row arithmetic does not depend on the step's token count (the route choice does).
  if (tickets_.get() != nullptr && gemm.fixed_rows() == 0 &&
      gpu::ChoosePackedRoute(tokens, w.format, w.n, w.k) == gpu::PackedRoute::kQGemm) {
    absl::StatusOr<gpu::QGemmPlan> plan = PlanFitting(weights, tokens, w);
    if (plan.ok()) return EnqueueQGemm(weights, *plan, x, w, y, y_f32, pdl, stream);
  }
  gpu::GemvDequantArgs d;
  d.dtype = weights.dtype;
  d.format = w.format;
  d.n = w.n;
  d.k = w.k;
  d.w = w.w;
  d.w_scales = w.scales;
  d.w_scale_count = w.scale_count;
  d.out = weights.dequant_scratch.get();
  PKV_RETURN_IF_ERROR(gpu::LaunchDequantizeGemvWeights(d, stream));
  return gemm.Linear(weights.dtype, x, tokens, w.k, d.out, w.n, y, y_f32, stream);
}

absl::StatusOr<gpu::QGemmPlan> PackedLinear::PlanFitting(const DeviceWeights& weights,
                                                         int64_t tokens,
                                                         const ProjectionWeights& w) const {
  const int32_t m = static_cast<int32_t>(tokens), n = static_cast<int32_t>(w.n),
                k = static_cast<int32_t>(w.k);
  auto fits = [&](const gpu::QGemmPlan& p) {
    return p.partial_floats() * 4 <= weights.dequant_scratch_bytes &&
           p.num_tickets() <= kMaxTickets;
  };
  PKV_ASSIGN_OR_RETURN(gpu::QGemmPlan plan, gpu::PlanQGemm(m, n, k, w.format, device_));
  if (fits(plan)) return plan;
  PKV_ASSIGN_OR_RETURN(plan, gpu::PlanQGemm(m, n, k, w.format, device_, /*parts=*/1));
  if (fits(plan)) return plan;
  return absl::ResourceExhaustedError("qgemm: the split workspace does not fit");
}

absl::Status PackedLinear::EnqueueQGemm(const DeviceWeights& weights, const gpu::QGemmPlan& plan,
                                        const void* x, const ProjectionWeights& w, void* y,
                                        bool y_f32, bool pdl, cudaStream_t stream) const {
  gpu::QGemmArgs a;
  a.dtype = weights.dtype;
  a.plan = plan;
  a.w = w.w;
  a.w_scales = w.scales;
  a.w_scale_count = w.scale_count;
  a.x = x;
  a.y = y;
  a.y_f32 = y_f32;
  a.partials = static_cast<float*>(weights.dequant_scratch.get());
  a.tickets = static_cast<int32_t*>(tickets_.get());
  a.pdl = pdl;
  return gpu::LaunchQGemm(a, stream);
}

}  // namespace pkv::cuda_backend
