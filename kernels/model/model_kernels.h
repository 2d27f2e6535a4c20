// The Llama-family model's kernels other than attention and the projections (CUDA): embedding
// fused with the first RMSNorm, RMSNorm fused with the residual add, the q/k/v post-processing
// (bias, Qwen3 per-head q/k RMSNorm, RoPE) fused with the K/V page write, and SiLU * mul.
//
// Numerics follow the CPU backend (worker/model/cpu_backend.h), which is their oracle: the residual
// stream stays float32; RMSNorm sums squares in float32 and scales by the weight in float32;
// RoPE angles are computed in double from the position and the config's inverse frequencies
// (worker/model/rope.h), so long contexts keep their accuracy; SiLU uses expf.
// Activations handed to the tensor cores are rounded to the weight dtype (fp16 or bf16) here.
//
// Launchers take an explicit stream, allocate nothing, never synchronise, check the launch and
// return absl::Status (INVALID_ARGUMENT naming the unsupported value). Every kernel is safe to
// capture in a CUDA graph: sizes are launch arguments, per-step data lives in device buffers.
// Thread-safety: launchers are pure functions of their arguments.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/decode/decode_params.h"

namespace pkv::gpu {

using DType = decode::DType;  // kFloat16 | kBFloat16: the weights' and activations' 16-bit type

// x = embed[token]; xn = RMSNorm(x) * norm_weight, for every token.
struct EmbedNormArgs {
  DType dtype = DType::kBFloat16;
  const void* embed = nullptr;  // [vocab][hidden] dtype
  // [num_tokens], each in [0, vocab), or -1 - k: the token is feedback_ids[k * feedback_stride]
  // (sample k of the previous step, which wrote it on the device: step pipelining).
  const int32_t* token_ids = nullptr;
  const int32_t* feedback_ids = nullptr;
  int32_t feedback_stride = 1;
  int32_t num_tokens = 0;
  int32_t hidden = 0;
  const float* norm_weight = nullptr;  // [hidden]
  float eps = 1e-5f;
  float* x = nullptr;  // [num_tokens][hidden] residual stream, written
  void* xn = nullptr;  // [num_tokens][hidden] dtype, written
  // When set, [num_tokens]: each token's sum of x^2 (the fused GEMV's kRmsNorm input reads it as
  // one part, gemv.h).
  float* sum_sq = nullptr;
};
absl::Status LaunchEmbedRmsNorm(const EmbedNormArgs& a, cudaStream_t stream);

// For each output row r with source token t = rows ? rows[r] : r:
//   v = x[t] + delta[t] (+ bias);  if write_x: x[t] = v;  xn[r] = RMSNorm(v) * norm_weight.
// The layer form (rows == nullptr, write_x) closes a residual block and norms the next block's
// input; the gather form (rows = the sampled tokens, !write_x) is the final norm before the LM
// head.
struct AddNormArgs {
  DType dtype = DType::kBFloat16;
  float* x = nullptr;             // [tokens][hidden] residual stream (fp32)
  const void* delta = nullptr;    // [tokens][hidden] dtype: the block's output projection, or
                                  // nullptr (then x alone is normalized)
  const float* bias = nullptr;    // [hidden] added with delta (o_proj bias), or nullptr
  const int32_t* rows = nullptr;  // [num_out] source token of each output row, or nullptr
  int32_t num_out = 0;
  int32_t hidden = 0;
  const float* norm_weight = nullptr;  // [hidden]
  float eps = 1e-5f;
  bool write_x = true;
  void* xn = nullptr;  // [num_out][hidden] dtype
  bool pdl = false;    // programmatic dependent launch (pdl.cuh)
};
absl::Status LaunchAddRmsNorm(const AddNormArgs& a, cudaStream_t stream);

// Per token: split the fused projection into q, k, v heads; add the bias; Qwen3: RMSNorm each q
// and k head with q_norm / k_norm; rotate q and k heads (rotate-half convention, angle =
// position * inv_freq[i] in double); write q to q_out and k, v into the token's KV slot.
// The slot is page * page_size + offset in the page (kernels/attention/kv_layout.h); a negative
// slot (graph padding) writes no K/V. FP8 pages (kv_dtype fp8_*): K and V are stored as
// FloatToFp8(x * (1 / scale)) of the fp32 value (one rounding, bit for bit QuantizeFp8 in
// kernels/attention/fp8_kv.h); q stays 16-bit.
struct QkvRopeArgs {
  DType dtype = DType::kBFloat16;
  const float* qkv = nullptr;   // [num_tokens][(H_q + 2 H_kv) * D] fp32: q heads, k heads, v heads
  const float* bias = nullptr;  // [(H_q + 2 H_kv) * D] or nullptr
  const float* q_norm = nullptr;  // [D] or nullptr (then k_norm is nullptr too)
  const float* k_norm = nullptr;  // [D] or nullptr
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [num_tokens]
  const int32_t* kv_slots = nullptr;   // [num_tokens]
  const double* inv_freq = nullptr;    // [D / 2] RoPE inverse frequencies (rope.h)
  int32_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // even, <= 512
  int32_t page_size = 0;
  void* q_out = nullptr;    // [num_tokens][H_q][D] dtype
  void* k_cache = nullptr;  // [num_pages][H_kv][page_size][D] dtype (or FP8 codes), this layer
  void* v_cache = nullptr;  // [num_pages][H_kv][page_size][D] dtype (or FP8 codes), this layer
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // kAuto: pages of `dtype`
  Fp8KvScales kv_scales;                        // this layer's (FP8 pages only); > 0
  bool pdl = false;                             // programmatic dependent launch (pdl.cuh)
};
absl::Status LaunchQkvRopeKvWrite(const QkvRopeArgs& a, cudaStream_t stream);

// out[t][i] = silu(gate_up[t][i]) * gate_up[t][inter + i], silu(z) = z / (1 + exp(-z)).
//   gate_up [num_tokens][2 * inter] dtype (the fused gate/up projection), out [num_tokens][inter]
// pdl: programmatic dependent launch (pdl.cuh).
absl::Status LaunchSiluMul(DType dtype, const void* gate_up, int64_t num_tokens, int32_t inter,
                           void* out, cudaStream_t stream, bool pdl = false);

// Paged causal attention for any head dim up to 512, one CTA per (token, q head): the fallback
// for shapes the tensor-core kernels are not compiled for (the tiny test model's D = 16) and a
// second opinion in tests. Query t sits at position positions[t] and attends keys 0..positions[t]
// of its row, whose pages start at page_ids[page_base[t]]; page_base[t] < 0 (graph padding)
// writes a zero output.
struct GenericAttentionArgs {
  DType dtype = DType::kBFloat16;
  const void* q = nullptr;        // [num_tokens][H_q][D]
  const void* k_cache = nullptr;  // [num_pages][H_kv][page_size][D] dtype or FP8 codes
  const void* v_cache = nullptr;
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // FP8: a key is Fp8ToFloat(code) * kv_scales.k
  Fp8KvScales kv_scales;
  const int32_t* page_ids = nullptr;   // block-table entries
  const int32_t* positions = nullptr;  // [num_tokens]
  const int32_t* page_base = nullptr;  // [num_tokens] first block-table entry of the token's row
  int32_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;
  float scale = 1.0f;   // softmax scale, usually 1/sqrt(D)
  void* out = nullptr;  // [num_tokens][H_q][D]
};
absl::Status LaunchGenericAttention(const GenericAttentionArgs& a, cudaStream_t stream);

// y[t][n] = sum_k x[t][k] * w[n][k] (fp32 accumulation) for a few tokens (t < num_tokens <= 4):
// the decode-time projections, which are bound by reading the weight matrix once. Each warp
// streams two weight rows with 16-byte loads, several in flight per lane, and dots them with every
// token's row of x (read through L1); one warp reduction per output. A cuBLAS alternative for
// small batches; SkinnyGemmSupported says when it applies.
struct SkinnyGemmArgs {
  DType dtype = DType::kBFloat16;
  const void* x = nullptr;  // [num_tokens][in] dtype, 16-byte aligned
  int32_t num_tokens = 0;
  int32_t in = 0;           // multiple of 8
  const void* w = nullptr;  // [out][in] dtype, 16-byte aligned
  int32_t out = 0;
  void* y = nullptr;  // [num_tokens][out], dtype or float32
  bool y_f32 = false;
};
inline constexpr int32_t kSkinnyGemmMaxTokens = 4;
bool SkinnyGemmSupported(int64_t num_tokens, int64_t in, const void* x, const void* w);
absl::Status LaunchSkinnyGemm(const SkinnyGemmArgs& a, cudaStream_t stream);

// Fills n elements with values uniform in [center - half_width, center + half_width) from a hash
// of (seed, index): random weights and caches for benchmarks without a host round trip.
// f32: float32 elements; otherwise `dtype`.
absl::Status LaunchFillRandom(void* dst, int64_t n, bool f32, DType dtype, uint64_t seed,
                              float center, float half_width, cudaStream_t stream);

}  // namespace pkv::gpu
