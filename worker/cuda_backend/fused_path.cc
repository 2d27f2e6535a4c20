#include "worker/cuda_backend/fused_path.h"

#include <utility>

#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/model/gemv.h"

namespace pkv::cuda_backend {
namespace {

// The format of each fused projection when every layer stores it alike; INVALID_ARGUMENT (the
// fused path is then unavailable) when layers differ.
absl::Status UniformFormats(const DeviceWeights& w, FusedFormats* f) {
  if (w.layers.empty()) return absl::OkStatus();
  const LayerWeights& first = w.layers[0];
  f->qkv = first.qkv.format;
  f->o = first.o.format;
  f->gate_up = first.gate_up.format;
  f->down = first.down.format;
  for (const LayerWeights& l : w.layers) {
    if (l.qkv.format != f->qkv || l.o.format != f->o || l.gate_up.format != f->gate_up ||
        l.down.format != f->down) {
      return absl::InvalidArgumentError("layers store a projection in different formats");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FusedPath> FusedPath::SetUp(const ModelConfig& c, const DeviceWeights& weights,
                                           int device, cudaStream_t stream) {
  FusedPath f;
  const decode::DType dtype = weights.dtype;
  FusedFormats formats;
  absl::Status uniform = UniformFormats(weights, &formats);
  absl::StatusOr<bool> pdl = gpu::PdlUsable(device);
  absl::StatusOr<gpu::GemvDevice> gemv_device = gpu::QueryGemvDevice(device, dtype);
  absl::StatusOr<gpu::GemvDevice> int4 =
      gpu::QueryGemvDevice(device, dtype, gpu::GemvWeightFormat::kInt4);
  absl::StatusOr<gpu::GemvDevice> fp8 =
      gpu::QueryGemvDevice(device, dtype, gpu::GemvWeightFormat::kFp8);
  if (!pdl.ok() || !gemv_device.ok() || !int4.ok() || !fp8.ok()) {
    cudaGetLastError();  // a failed query must not surface at the next launch check
    PKV_LOG(WARNING) << "cuda backend: fused path / PDL unavailable: "
                     << (!pdl.ok()           ? pdl.status()
                         : !gemv_device.ok() ? gemv_device.status()
                         : !int4.ok()        ? int4.status()
                                             : fp8.status())
                            .message();
    return f;
  }
  f.pdl_usable_ = *pdl;
  formats.dense = *gemv_device;
  formats.int4 = *int4;
  formats.fp8 = *fp8;
  absl::StatusOr<FusedPlans> plans =
      uniform.ok() ? PlanFusedLayers(c, formats) : absl::StatusOr<FusedPlans>(uniform);
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
