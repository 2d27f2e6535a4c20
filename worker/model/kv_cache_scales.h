// The FP8 KV cache's static per-layer scales (kernels/attention/fp8_kv.h) of a checkpoint.
//
// Choice: static scales, loaded when the checkpoint carries them, else 1.0 (what vLLM and SGLang
// do for --kv_cache_dtype fp8 without calibrated scales). Not dynamic (e.g. the first prefill's
// absmax) because a page's codes must mean the same thing for every later reader: the prefix cache
// shares pages across requests, so a scale that changed after the first batch would silently
// re-interpret older pages, and one picked from the first request would make a worker's accuracy
// depend on which prompt came first. With scale 1.0, E4M3 holds |x| <= 448 with 3 mantissa bits
// (relative step 2^-4) and E5M2 |x| <= 57344 with 2; post-RoPE K and V of Llama-family models stay
// well inside 448 (larger values saturate rather than overflow: fp8.h).
//
// Tensor names (llm-compressor / vLLM's current format): model.layers.<i>.self_attn.k_scale and
// .v_scale, scalars ([] or [1]) in F32/F16/BF16. Either all layers carry both or none does.
// Thread-safety: pure function of the checkpoint.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/fp8_kv.h"
#include "worker/model/checkpoint.h"

namespace pkv {

// One entry per layer, or empty when the checkpoint has no KV scales (callers use 1.0).
// INVALID_ARGUMENT, naming the tensor, for a partial set, a non-scalar, or a scale that is not
// positive and finite.
absl::StatusOr<std::vector<Fp8KvScales>> LoadKvCacheScales(const Checkpoint& checkpoint,
                                                           int32_t num_layers);

}  // namespace pkv
