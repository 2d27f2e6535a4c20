// Projections of packed (quantized) weights outside the fused GEMV: steps of more tokens than it
// takes, and every step when the fused path is off. Per projection ChoosePackedRoute
// (kernels/model/qgemm_plan.h) picks the quantized-weight GEMM, which reads the packed weights
// directly (kernels/model/qgemm.h), or dequantizes the projection into the weights' scratch and
// runs the dense GEMM on it (large prefill steps, where cuBLAS amortizes the one dequantize).
//
// Workspace: the QGemm's split partials live in the dequantize scratch (one projection at a time
// on the backend's stream, so the two uses never overlap); its split tickets in a small buffer
// owned here, zeroed at set-up and left at zero by every launch. A plan whose workspace does not
// fit runs unsplit, and one that still does not fit dequantizes.
// Thread-safety: immutable after SetUp (the workspace is written only by the kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"
#include "kernels/model/qgemm_plan.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/gemm.h"

namespace pkv::cuda_backend {

class PackedLinear {
 public:
  PackedLinear() = default;

  // Queries `device` and allocates the tickets (zeroed on `stream`) when `weights` holds packed
  // projections; otherwise an unused instance.
  static absl::StatusOr<PackedLinear> SetUp(const DeviceWeights& weights, int device,
                                            cudaStream_t stream);

  // y [tokens][w.n] = x [tokens][w.k] . w^T (dtype, or float32 with y_f32), w packed; enqueues
  // only. `pdl` launches the QGemm with programmatic dependent launch.
  // REQUIRES: w.packed(), SetUp with the weights holding w.
  absl::Status Enqueue(const DeviceWeights& weights, const void* x, int64_t tokens,
                       const ProjectionWeights& w, void* y, bool y_f32, bool pdl, Gemm& gemm,
                       cudaStream_t stream) const;

  static constexpr int32_t kMaxTickets = 4096;

 private:
  // The planner's QGemm plan, or one part where its split workspace does not fit the scratch
  // (the planner may still split a 4-bit projection for its scale table); RESOURCE_EXHAUSTED
  // when neither fits (the projection then dequantizes).
  absl::StatusOr<gpu::QGemmPlan> PlanFitting(const DeviceWeights& weights, int64_t tokens,
                                             const ProjectionWeights& w) const;
  absl::Status EnqueueQGemm(const DeviceWeights& weights, const gpu::QGemmPlan& plan, const void* x,
                            const ProjectionWeights& w, void* y, bool y_f32, bool pdl,
                            cudaStream_t stream) const;

  gpu::QGemmDevice device_;
  DeviceBuffer tickets_;  // [kMaxTickets]
};

}  // namespace pkv::cuda_backend
