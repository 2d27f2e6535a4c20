#include "worker/cuda_backend/fused_path.h"

#include <utility>

#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/model/gemv.h"

namespace pkv::cuda_backend {

absl::StatusOr<FusedPath> FusedPath::SetUp(const ModelConfig& c, decode::DType dtype, int device,
                                           cudaStream_t stream) {
  FusedPath f;
  absl::StatusOr<bool> pdl = gpu::PdlUsable(device);
  absl::StatusOr<gpu::GemvDevice> gemv_device = gpu::QueryGemvDevice(device, dtype);
  if (!pdl.ok() || !gemv_device.ok()) {
    cudaGetLastError();  // a failed query must not surface at the next launch check
    PKV_LOG(WARNING) << "cuda backend: fused path / PDL unavailable: "
                     << (pdl.ok() ? gemv_device.status() : pdl.status()).message();
    return f;
  }
  f.pdl_usable_ = *pdl;
  absl::StatusOr<FusedPlans> plans = PlanFusedLayers(c, *gemv_device);
  if (!plans.ok()) {
    PKV_LOG(INFO) << "cuda backend: fused small-batch path unavailable: "
                  << plans.status().message();
    return f;
  }
  f.plans_ = std::make_unique<FusedPlans>(*std::move(plans));
  const FusedPlans& p = *f.plans_;
  const int64_t parts_bytes = int64_t{p.residual_parts} * gpu::kGemvMaxTokens * 4;
  PKV_ASSIGN_OR_RETURN(f.partials_, DeviceBuffer::AllocateZeroed(p.partial_floats() * 4, stream));
  // Tickets must start at zero; every launch leaves them at zero.
  PKV_ASSIGN_OR_RETURN(f.tickets_,
                       DeviceBuffer::AllocateZeroed(int64_t{p.num_tickets()} * 4, stream));
  PKV_ASSIGN_OR_RETURN(f.sum_sq_attn_, DeviceBuffer::AllocateZeroed(parts_bytes, stream));
  PKV_ASSIGN_OR_RETURN(f.sum_sq_mlp_, DeviceBuffer::AllocateZeroed(parts_bytes, stream));
  PKV_LOG(INFO) << "cuda backend: fused small-batch path available (" << gemv_device->num_sms
                << " SMs x " << gemv_device->ctas_per_sm << " GEMV CTAs; split-K qkv "
                << p.qkv.parts << ", o " << p.o.parts << ", gate/up " << p.gate_up.parts
                << ", down " << p.down.parts << "), programmatic dependent launch "
                << (f.pdl_usable_ ? "usable" : "unavailable");
  return f;
}

}  // namespace pkv::cuda_backend
