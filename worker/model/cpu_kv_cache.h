// The paged KV cache of the CPU backends (CpuModelBackend; each TpRank holds one for its KV heads):
// per layer, K and V each [num_pages][num_kv_heads][page_size][head_dim] (kernels/attention/
// kv_layout.h), stored as float32 (KvCacheDtype::kAuto, the CPU backend's model dtype) or as FP8
// codes with one scale per (layer, K or V) (kernels/attention/fp8_kv.h).
//
// FP8 mode is the oracle of the GPU's FP8 KV path, so it quantizes and attends exactly as the FP8
// kernels' contract says: a written value x is stored as FloatToFp8(x / scale) (QuantizeFp8: round
// to nearest even, saturating), and attention reads Fp8ToFloat(code) * scale
// (ReferencePrefillAttentionFp8), i.e. the model sees the dequantized K/V, also for the tokens of
// the step that wrote them. Pages written by one sequence and read by another (the prefix cache)
// hold the same codes either way.
// Thread-safety: not thread-safe; owned by one backend (or rank) and used on its thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/attention/kv_layout.h"

namespace pkv {

// What a CPU backend's KV cache stores. Default: float32, today's behaviour.
struct CpuKvCacheOptions {
  KvCacheDtype dtype = KvCacheDtype::kAuto;
  // FP8 only: one entry per layer, or empty for scale 1.0 everywhere (vLLM's default for a
  // checkpoint without k_scale/v_scale: kv_cache_scales.h says why).
  std::vector<Fp8KvScales> scales;
};

// INVALID_ARGUMENT unless options.scales is empty or has num_layers entries, all positive finite.
absl::Status CheckCpuKvCacheOptions(const CpuKvCacheOptions& options, int32_t num_layers);

// For logs: "float32", "fp8_e4m3 (scales 1.0)" or "fp8_e4m3 (per-layer scales)".
std::string CpuKvCacheDescription(const CpuKvCacheOptions& options);

// Bytes of one page's K and V over all layers: 2 * L * H_kv * page_size * D * element bytes
// (4 for float32, 1 for FP8). The pool-sizing unit (a memory budget / this = pages).
int64_t CpuKvBytesPerPage(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                          int32_t page_size, KvCacheDtype dtype);

class CpuKvCache {
 public:
  // shape: the attention shape of this cache's heads (local heads for a tensor-parallel rank);
  // shape.kv_elem_bytes is ignored. REQUIRES: num_layers > 0, num_pages > 0, shape sizes > 0,
  // options.scales empty or num_layers entries, every scale > 0 and finite.
  CpuKvCache(int32_t num_layers, const KvShape& shape, int64_t num_pages,
             const CpuKvCacheOptions& options);

  KvCacheDtype dtype() const { return dtype_; }
  const Fp8KvScales& scales(int layer) const { return scales_[layer]; }
  int64_t bytes() const;

  // Writes the K and V rows of `num_tokens` tokens of `layer`: token t goes to slot
  // positions[t] % page_size of page token_page[t].
  //   k, v [num_tokens][H_kv][D]; positions, token_page [num_tokens]
  // REQUIRES: token_page[t] in [0, num_pages).
  void Write(int layer, const float* k, const float* v, int64_t num_tokens,
             const int32_t* positions, const int32_t* token_page);

  // Causal paged attention of `layer` (ReferencePrefillAttention's contract, over the dequantized
  // values in FP8 mode): q, out [qo_indptr[B]][H_q][D].
  void Attend(int layer, const float* q, const int32_t* qo_indptr, const BlockTableView& table,
              float softmax_scale, float* out) const;

 private:
  const KvShape shape_;
  const int64_t num_pages_;
  const KvCacheDtype dtype_;
  std::vector<Fp8KvScales> scales_;          // [L]; all 1 for float32
  std::vector<std::vector<float>> k_f32_;    // [L][num_pages][H_kv][page_size][D] (kAuto)
  std::vector<std::vector<float>> v_f32_;    // [L][num_pages][H_kv][page_size][D] (kAuto)
  std::vector<std::vector<uint8_t>> k_fp8_;  // [L][num_pages][H_kv][page_size][D] (FP8 codes)
  std::vector<std::vector<uint8_t>> v_fp8_;  // [L][num_pages][H_kv][page_size][D] (FP8 codes)
};

}  // namespace pkv
