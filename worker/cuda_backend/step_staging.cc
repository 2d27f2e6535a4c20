#include "worker/cuda_backend/step_staging.h"

#include <algorithm>
#include <utility>

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/prefill/prefill_plan.h"

namespace pkv::cuda_backend {

absl::StatusOr<StepStaging> StepStaging::Create(std::unique_ptr<StepBuilder> builder,
                                                cudaStream_t stream) {
  StepStaging st;
  st.builder_ = std::move(builder);
  const StepLimits& limits = st.builder_->limits();
  StagingCaps caps;
  caps.tokens = limits.max_tokens;
  caps.sampled = limits.max_rows;
  // Whole tiles: a tile a row and one more per 64 queries. Split tiles: at most max_splits a
  // query (a run of queries takes a tile per split), and exactly that per row of a padded
  // decode-only step (PlanSplitDecodeSlots).
  caps.tiles = std::max(
      limits.max_tokens / prefill::kPrefillBlockM + limits.max_rows,
      std::max(limits.max_tokens, limits.max_rows) * st.builder_->shape().split_rule.max_splits);
  caps.page_ids = limits.max_page_ids;
  const int64_t bytes = LayoutStaging(caps).total_bytes;
  PKV_ASSIGN_OR_RETURN(st.image_, DeviceBuffer::AllocateZeroed(bytes, stream));
  for (PinnedBuffer& host : st.image_host_) {
    PKV_ASSIGN_OR_RETURN(host, PinnedBuffer::Allocate(bytes));
  }
  return st;
}

absl::Status StepStaging::Upload(int32_t bucket, cudaStream_t stream, DeviceStep* s) {
  StepHost& host = host_;
  StagingLayout layout;
  if (bucket > 0) {
    // The bucket's fixed layout: the captured graph's pointers stay valid for every replay.
    StepBuilder::PadForGraph(bucket, &host);
    StagingCaps caps;
    caps.tokens = bucket;
    caps.sampled = bucket;
    // Uniform attention: one tile per row (split: max_splits a row; step_builder.h); else none
    // in a decode-only step.
    caps.tiles =
        host.tiles.empty() ? 0 : bucket * (host.split_slots ? host.split_rule.max_splits : 1);
    caps.page_ids = 1;  // page_ids is the last region: its capacity does not move any offset
    layout = LayoutStaging(caps);
  } else {
    layout = LayoutStaging(host.Caps());
  }
  // The other copy may be the source of the previous step's upload, still queued on `stream`;
  // this one's last upload (two steps ago) has run: that step finished before this one started.
  PinnedBuffer& image_host = image_host_[next_host_];
  next_host_ ^= 1;
  const int64_t used = StepBuilder::FillStaging(host, layout, image_host.bytes_ptr());
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(image_.get(), image_host.get(), used, cudaMemcpyHostToDevice, stream));
  const uint8_t* base = image_.bytes_ptr();
  s->tokens = host.padded_tokens;
  s->decode_tokens = host.decode_only ? host.padded_tokens : host.num_decode_rows;
  s->logit_rows = bucket > 0 ? bucket : host.num_sampled;
  s->num_tiles = static_cast<int32_t>(host.tiles.size());
  s->split_windows = host.split_windows.data();
  s->num_split_windows = static_cast<int32_t>(host.split_windows.size());
  s->header = reinterpret_cast<const int32_t*>(base + layout.header);
  s->token_ids = reinterpret_cast<const int32_t*>(base + layout.token_ids);
  s->positions = reinterpret_cast<const int32_t*>(base + layout.positions);
  s->kv_slots = reinterpret_cast<const int32_t*>(base + layout.kv_slots);
  s->token_page_base = reinterpret_cast<const int32_t*>(base + layout.token_page_base);
  s->sample_token = reinterpret_cast<const int32_t*>(base + layout.sample_token);
  s->sample_params = reinterpret_cast<const gpu::SampleRowParams*>(base + layout.sample_params);
  s->tiles = reinterpret_cast<const prefill::PrefillTile*>(base + layout.prefill_tiles);
  s->page_ids = reinterpret_cast<const int32_t*>(base + layout.page_ids);
  return absl::OkStatus();
}

}  // namespace pkv::cuda_backend
