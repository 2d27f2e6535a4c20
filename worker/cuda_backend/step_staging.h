// The host-to-device path of a step: the StepBuilder (validation), the step as built on the host
// (StepHost), and the staging image in pinned host memory and on the device (step_builder.h lays
// it out). Upload pads a graph step to its bucket, writes the image, enqueues its one copy and
// hands back the step's device view (DeviceStep).
//
// A CUDA graph bakes in the device image's addresses: a bucket's steps always use the bucket's
// fixed layout, and the image is allocated once at load for the largest step. The pinned host
// image alternates between two copies: a step's upload may still be queued behind the running
// step when the next step is staged (step pipelining, model_backend.h).
// Thread-safety: not thread-safe (owned by the backend; the thread that runs its steps).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/device_step.h"
#include "worker/cuda_backend/step_builder.h"
#include "worker/model/model_backend.h"

namespace pkv::cuda_backend {

class StepStaging {
 public:
  StepStaging() = default;

  // Takes `builder` and allocates an image for the largest step its limits allow (the device copy
  // zeroed on `stream`).
  static absl::StatusOr<StepStaging> Create(std::unique_ptr<StepBuilder> builder,
                                            cudaStream_t stream);

  // Validates `rows` into host() (StepBuilder::Build).
  absl::Status Build(absl::Span<const BatchRow> rows, bool need_params) {
    return builder_->Build(rows, need_params, &host_);
  }
  // Takes a step built and validated elsewhere (a tensor-parallel rank: the group's one builder).
  // Vectors keep their capacity: no allocation once warm.
  void SetHost(const StepHost& host) { host_ = host; }
  // Tiles for decode rows too (StepShape::tiles_for_every_row), from the next Build on.
  void SetTilesForEveryRow(bool enabled) { builder_->set_tiles_for_every_row(enabled); }
  void SetSplitTiles(bool enabled) { builder_->set_split_tiles(enabled); }
  const StepHost& host() const { return host_; }

  // Pads host() to `bucket` rows (> 0: a decode-only graph step; 0: eager, unpadded), writes the
  // image and enqueues its upload on `stream`; fills `s`.
  absl::Status Upload(int32_t bucket, cudaStream_t stream, DeviceStep* s);

 private:
  std::unique_ptr<StepBuilder> builder_;
  StepHost host_;
  DeviceBuffer image_;          // the staging image on the device
  PinnedBuffer image_host_[2];  // and on the host, filled each step, alternately
  int next_host_ = 0;           // the one the next Upload fills
};

}  // namespace pkv::cuda_backend
