// The paged causal prefill-attention kernel (CUDA), flash-attention-2 style on mma.sync tensor
// cores: one CTA of 4 warps per (query tile of kPrefillBlockM queries, q head); each warp keeps 16
// query rows' Q fragments in registers, streams the row's keys in kPrefillBlockN-key tiles from
// the paged cache with cp.async (double-buffered, XOR-swizzled shared memory, ldmatrix), and keeps
// the online softmax (base 2, fp32) and the output accumulator in registers. Compiled for head
// dims 64 and 128, fp16 and bf16 (the shipped Llama-3 1B/8B and Qwen shapes), over 16-bit or
// FP8 (E4M3 / E5M2) pages; others use the generic kernel (kernels/model/model_kernels.h).
//
// Usage: ConfigurePrefillKernels() once per process (raises the shared-memory limit), then per
// layer LaunchPrefillAttention with the tiles of PlanPrefillTiles (prefill_plan.h) in device
// memory. Launchers take an explicit stream, allocate nothing, never synchronise and check the
// launch. Thread-safety: pure functions of their arguments.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/decode/decode_params.h"
#include "kernels/prefill/prefill_plan.h"
#include "kernels/prefill/prefill_split_plan.h"

namespace pkv::prefill {

using DType = decode::DType;

struct PrefillArgs {
  DType dtype = DType::kBFloat16;               // q and out; the pages' too when kv_dtype is kAuto
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // FP8: pages of codes dequantized by kv_scales
  Fp8KvScales kv_scales;
  const void* q = nullptr;             // [tokens][H_q][D]
  const void* k_cache = nullptr;       // [num_pages][H_kv][page_size][D], this layer
  const void* v_cache = nullptr;       // [num_pages][H_kv][page_size][D]
  const int32_t* page_ids = nullptr;   // block-table entries; a tile's row starts at page_base
  const PrefillTile* tiles = nullptr;  // [num_tiles], device memory
  int32_t num_tiles = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;
  float scale = 1.0f;   // softmax scale, usually 1/sqrt(D)
  void* out = nullptr;  // [tokens][H_q][D]; rows of the tiles' queries are written
  // Split tiles (PlanSplitPrefillTiles with `split_rule`) of the queries of tokens
  // [split_token_begin, split_token_begin + num_tokens) (one PrefillSplitWindow): the tiles leave
  // partials in `split_partials` (PrefillSplitPartialBytes(num_tokens, ...), slot rows counted
  // from split_token_begin), then the merge kernel writes out for each of those tokens whose
  // positions[] entry (the query's position, device memory, indexed by token) is >= 0. Null
  // split_partials: whole tiles (PlanPrefillTiles).
  void* split_partials = nullptr;
  PrefillSplitRule split_rule;
  const int32_t* positions = nullptr;
  int32_t split_token_begin = 0;
  int32_t num_tokens = 0;
};

// Whether the tensor-core kernel is compiled for this head dim (64, 128).
bool PrefillHeadDimSupported(int32_t head_dim);

// Dynamic shared memory of one CTA.
int64_t PrefillSmemBytes(int32_t head_dim);

// Sets the kernels' dynamic shared-memory limit; call once per process before launching.
absl::Status ConfigurePrefillKernels();

// INVALID_ARGUMENT for an unsupported head dim (listing the supported ones), H_q not a multiple of
// H_kv, a page size outside [1, 1024], a null pointer, non-positive FP8 scales or (split tiles)
// an invalid split rule.
absl::Status LaunchPrefillAttention(const PrefillArgs& args, cudaStream_t stream);

}  // namespace pkv::prefill
