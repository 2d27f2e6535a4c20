// Validation of a ModelBackend::Step batch against a model and a KV pool, shared by the CPU
// backends (single-rank and tensor-parallel) so both refuse exactly the same batches.
// Thread-safety: pure function.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/model/model_backend.h"
#include "worker/model/model_config.h"

namespace pkv {

// INVALID_ARGUMENT "batch row <r>: <what>" for a row that feeds no tokens, has a negative
// start_pos, runs past max_position_embeddings, has too few pages or a page id outside
// [0, num_kv_pages), feeds a token outside the vocabulary, samples without params (when
// need_params) or with a negative sample_index; or when the batch feeds more than 2^31-1 tokens.
absl::Status ValidateBatchRows(const ModelConfig& config, int32_t page_size, int64_t num_kv_pages,
                               absl::Span<const BatchRow> rows, bool need_params);

}  // namespace pkv
