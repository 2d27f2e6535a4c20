// What the fused small-batch path (fused_plan.h, kernels/model/gemv.h) and programmatic dependent
// launch need on this device: whether PDL is usable, the model shape's GEMV plans and the GEMV
// workspace every fused launch shares (they run one after another on the backend's stream).
// Whether a step takes the path (an option, the step's size) is the backend's choice, not this
// part's.
// Thread-safety: immutable after SetUp (the workspace is written only by the kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/fused_plan.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

class FusedPath {
 public:
  FusedPath() = default;

  // Queries `device`, plans `c`'s projections and allocates the workspace, zeroed on `stream`.
  // An unsupported device or shape is not an error (the path is unavailable, the backend runs its
  // cuBLAS path; logged); only a failed allocation is.
  static absl::StatusOr<FusedPath> SetUp(const ModelConfig& c, decode::DType dtype, int device,
                                         cudaStream_t stream);

  bool available() const { return plans_ != nullptr; }
  // Programmatic dependent launch between the per-layer kernels (sm_90+ running sm_90 code).
  bool pdl_usable() const { return pdl_usable_; }
  const FusedPlans& plans() const { return *plans_; }  // REQUIRES: available()

  float* partials() const { return static_cast<float*>(partials_.get()); }  // [partial_floats()]
  int32_t* tickets() const {  // [num_tickets()], zero at rest: every launch leaves them at zero
    return static_cast<int32_t*>(tickets_.get());
  }
  // x^2 sums per 16 rows of hidden: [hidden / 16][8] after o (attn) and after down (mlp; the
  // embedding leaves [1][8] there for layer 0).
  float* sum_sq_attn() const { return static_cast<float*>(sum_sq_attn_.get()); }
  float* sum_sq_mlp() const { return static_cast<float*>(sum_sq_mlp_.get()); }

 private:
  bool pdl_usable_ = false;
  std::unique_ptr<FusedPlans> plans_;  // null: the shape or the device is unsupported
  DeviceBuffer partials_, tickets_, sum_sq_attn_, sum_sq_mlp_;
};

}  // namespace pkv::cuda_backend
