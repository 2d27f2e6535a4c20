// The two kernels tensor parallelism adds to the CUDA forward pass (tp_rank_hooks.h uses them):
// the vocabulary-parallel embedding lookup and the re-layout of all-gathered vocabulary slices of
// the logits. Launchers take an explicit stream, allocate nothing, never synchronise and are safe
// to capture in a CUDA graph (sizes are launch arguments, token ids are read on the device).
// Thread-safety: pure launchers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/decode/decode_params.h"

namespace pkv::cuda_backend {

// For every token t with id = token_ids[t]: x[t] = 0 and out[t] = embed[id - vocab_begin] when
// vocab_begin <= id < vocab_end, else zeros. Summing `out` over the ranks (each owning one
// vocabulary slice) gives the embedding exactly: one rank contributes each row.
struct EmbedShardArgs {
  decode::DType dtype = decode::DType::kBFloat16;
  const void* embed = nullptr;         // [vocab_end - vocab_begin][hidden] dtype
  const int32_t* token_ids = nullptr;  // [num_tokens]
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  int32_t vocab_begin = 0;
  int32_t vocab_end = 0;
  float* x = nullptr;   // [num_tokens][hidden], zeroed (the residual stream the add-norm reads)
  void* out = nullptr;  // [num_tokens][hidden] dtype
};
absl::Status LaunchEmbedShard(const EmbedShardArgs& a, cudaStream_t stream);

// out[r][v] = the logit of vocabulary entry v for row r, from the all-gather of every rank's
// LM-head output: gathered holds tp segments of rows * chunk floats, segment q = rank q's
// [rows][V_q] logits (row stride V_q = min(chunk, vocab - q * chunk), unused tail after).
//   gathered [tp][rows * chunk], out [rows][vocab]
absl::Status LaunchGatherVocabShards(const float* gathered, int32_t rows, int32_t tp, int32_t chunk,
                                     int32_t vocab, float* out, cudaStream_t stream);

}  // namespace pkv::cuda_backend
