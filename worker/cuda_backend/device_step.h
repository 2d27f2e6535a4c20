// The device view of one step: pointers into the staging image on the device (step_builder.h
// lays it out) and the step's launch dimensions. Filled by the backend's Stage after the image's
// upload is enqueued; read by every enqueue function of the forward pass, eagerly or under
// CUDA-graph capture (a bucket's graph sees the same pointers on every replay).
// Thread-safety: a plain value.
#pragma once

#include <cstdint>

#include "kernels/model/sampling_types.h"
#include "kernels/prefill/prefill_plan.h"
#include "kernels/prefill/prefill_split_plan.h"

namespace pkv {

// Device pointers into the staging buffer for one step, and the step's launch dimensions.
struct DeviceStep {
  int32_t tokens = 0;               // T rows of every activation (padded to the bucket for graphs)
  int32_t decode_tokens = 0;        // tokens [0, decode_tokens) belong to decode rows
  int32_t logit_rows = 0;           // rows of the final norm, LM head and sampling grid
  int32_t num_tiles = 0;            // prefill-kernel tiles
  const int32_t* header = nullptr;  // [kHeaderInts]; header[2] = rows to sample
  const int32_t* token_ids = nullptr;        // [tokens]
  const int32_t* positions = nullptr;        // [tokens]
  const int32_t* kv_slots = nullptr;         // [tokens] page * page_size + offset; -1: padding
  const int32_t* token_page_base = nullptr;  // [tokens] the row's first page_ids entry
  const int32_t* sample_token = nullptr;     // [logit_rows] token index of each sampled row
  const gpu::SampleRowParams* sample_params = nullptr;  // [logit_rows]
  const prefill::PrefillTile* tiles = nullptr;          // [num_tiles]
  // Split tiles (step_builder.h): their windows, in host memory (read when enqueuing).
  const prefill::PrefillSplitWindow* split_windows = nullptr;
  int32_t num_split_windows = 0;
  const int32_t* page_ids = nullptr;  // block tables: decode rows', then prefill rows'
};

}  // namespace pkv
