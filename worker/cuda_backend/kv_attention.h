// The KV pool of one backend (one rank) and the attention that reads it: the pool's pages, the
// RoPE table keys are rotated with before they are written, the decode engine (decode rows) and
// the prefill / generic kernels (the other rows).
//
// Pool layout: one allocation [L][K|V][num_pages][H_kv][page_size][D] in the 16-bit dtype (or,
// with kv_cache_dtype fp8_*, 1-byte FP8 codes: half the bytes a page, so twice the pages for the
// same memory), zeroed at load so tokens past a row's length inside its last page never hold NaN
// bit patterns; a page id names the same tokens in every layer (and on every tensor-parallel
// rank). FP8 scales are per layer (K and V; kernels/attention/fp8_kv.h): given, or 1.0 each
// (vLLM's default when a checkpoint carries no k_scale / v_scale). Every attention path reads FP8
// pages: the decode engine (all routes), the mma.sync prefill kernel and the generic kernel.
// Set-up is two phases around the activations: Create (the decode engine may calibrate its route
// policy with buffers of its own, so it runs before anything large is allocated), then
// AllocatePool (which may size itself from the free memory left).
// Per step: PrepareDecode plans and uploads the decode rows (graph-sized for the bucket), then
// EnqueueAttention runs once per layer; like the rest of the forward pass it only enqueues.
// Uniform attention (the backend's deterministic mode): every row, decode rows included, runs
// through one kernel with one arithmetic per query, so a token's output does not depend on the
// batch, on how its prompt was chunked, or on whether it is decoded or recomputed by prefill:
// the mma.sync prefill kernel (keys in fixed 64-key tiles from position 0; a fully masked tile
// leaves the running state bitwise unchanged), or the generic kernel for every row where the
// prefill kernel lacks the head dim. The decode engine is not used: its split of a row depends
// on the whole batch. With split tiles (SetUniform's split_tiles), the prefill kernel cuts each
// query's keys at positions that depend on the query's position alone and a merge kernel folds
// the splits in order (prefill_split_plan.h), so a decode row's keys are read by up to 16 CTAs
// a KV head (its q heads packed in the tile's rows) instead of one CTA a q head, still the same
// bits wherever the query is computed; the partial slots are one window's
// (kPrefillSplitWindowTokens tokens), reused window by window.
// Thread-safety: not thread-safe (owned by the backend; the thread that runs its steps).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/decode/decode_params.h"
#include "kernels/prefill/prefill_split_plan.h"
#include "worker/cuda_backend/decode_attention.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/device_step.h"
#include "worker/cuda_backend/step_builder.h"
#include "worker/model/model_backend.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

struct KvAttentionOptions {
  int32_t page_size = 16;
  bool tensor_cores = true;  // the decode engine and the mma.sync prefill kernel where supported
  DecodePolicyOptions policy;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;  // kAuto: pages of the model's 16-bit dtype
  std::vector<Fp8KvScales> kv_scales;  // [num_layers] FP8 scales; empty: 1.0 for every layer
  bool split_partials = false;  // allocate the split tiles' partial slots at Create (SetUniform)
};

// Pages of `page_bytes` (all layers' K and V) the pool takes: num_pages when > 0, else
// memory_fraction of the free bytes, or of limit_left when a limit applies and leaves less
// (negative when the weights and buffers already exceed the limit).
// RESOURCE_EXHAUSTED with the figures when not one page fits, or num_pages does not fit the limit.
absl::StatusOr<int64_t> KvPoolPages(int64_t num_pages, double memory_fraction, int64_t free_bytes,
                                    std::optional<int64_t> limit_left, int64_t page_bytes);

class KvAttention {
 public:
  // Phase one: the attention kernels for `c`'s shape and the RoPE table (uploaded synchronously).
  // `buckets`: the graph batch buckets the decode engine keeps a workspace for.
  static absl::StatusOr<std::unique_ptr<KvAttention>> Create(const ModelConfig& c,
                                                             const KvAttentionOptions& options,
                                                             decode::DType dtype,
                                                             const std::vector<int32_t>& buckets,
                                                             int device);
  // Phase two: num_pages pages, or (num_pages == 0) memory_fraction of the device's free memory,
  // or of `limit_left` bytes when that is less (nullopt: no limit; KvPoolPages); at most what
  // int32 slots address. RESOURCE_EXHAUSTED when not one page fits, or num_pages exceeds the
  // limit.
  absl::Status AllocatePool(int64_t num_pages, double memory_fraction,
                            std::optional<int64_t> limit_left, cudaStream_t stream);

  int64_t num_pages() const { return num_pages_; }
  int64_t pool_bytes() const { return pool_.bytes(); }
  int32_t page_size() const { return shape_.page_size; }
  KvCacheDtype kv_cache_dtype() const { return kv_dtype_; }
  // Layer `layer`'s FP8 scales (1.0 each with 16-bit pages, where they are unused).
  const Fp8KvScales& kv_scales(int layer) const { return kv_scales_[layer]; }
  // Bytes of one page (K and V of every layer): what the pool is sized in.
  int64_t bytes_per_page() const;
  // Layer `layer`'s K and V pages: [num_pages][H_kv][page_size][D] dtype (or FP8 codes) each.
  void* k_cache(int layer) const { return k_cache_[layer]; }
  void* v_cache(int layer) const { return v_cache_[layer]; }
  const double* rope_inv_freq() const {  // [D / 2]
    return static_cast<const double*>(inv_freq_.get());
  }
  bool decode_engine() const { return decode_ != nullptr; }  // false: decode rows run generic
  void SetWorkqueueBalanced(bool on) {  // DecodeAttention::set_workqueue_balanced
    if (decode_ != nullptr) decode_->set_workqueue_balanced(on);
  }
  void SetFewRowW8(bool on) {  // DecodeAttention::set_few_row_w8
    if (decode_ != nullptr) decode_->set_few_row_w8(on);
  }
  // Uniform attention on or off (see above), with split tiles or whole ones. With the prefill
  // kernel, the step must carry a tile for every row (StepShape::tiles_for_every_row; split
  // tiles: StepShape::split_tiles). Split tiles allocate the partial slots on first use.
  absl::Status SetUniform(bool enabled, bool split_tiles);
  bool uniform() const { return uniform_; }
  bool uniform_split() const { return uniform_ && split_partials_.get() != nullptr && split_; }
  bool prefill_tensor_cores() const { return prefill_tensor_cores_; }
  // The split tiles' rule (StepShape::split_rule must be this one): the defaults, with this
  // shape's group.
  prefill::PrefillSplitRule split_rule() const {
    prefill::PrefillSplitRule r;
    r.group = shape_.num_q_heads / shape_.num_kv_heads;
    return r;
  }
  float softmax_scale() const { return softmax_scale_; }

  // Overwrites every page with random values (benchmarks). Enqueued on `stream`.
  absl::Status FillRandom(uint64_t seed, cudaStream_t stream);

  // Plans the step's decode rows for `bucket` (0: the smallest bucket holding them) and enqueues
  // the plan's upload. Nothing to do without the decode engine or decode rows.
  absl::Status PrepareDecode(const StepHost& host, int32_t bucket, int32_t max_rows,
                             cudaStream_t stream);
  // What the prepared decode launches bake into a captured graph (0 without the engine).
  uint64_t LaunchSignature() const { return decode_ ? decode_->LaunchSignature() : 0; }
  // Layer `layer`'s attention of every row of `s`: q [tokens][H_q][D] rotated queries (dtype) ->
  // out [tokens][H_q][D]. pdl: the decode launches are programmatic dependents of the previous
  // kernel (the other attention kernels launch plainly).
  absl::Status EnqueueAttention(int layer, const DeviceStep& s, const void* q, void* out,
                                cudaStream_t stream, bool pdl) const;
  // The decode route, launches (a layer) and split occupancy of the last prepared step `host`.
  void FillDecodeStats(const StepHost& host, StepStats* stats) const;

 private:
  KvAttention() = default;
  absl::Status AllocateSplitPartials();  // once; nothing without the prefill kernel
  absl::Status EnqueueGeneric(int layer, const DeviceStep& s, int32_t first, int32_t count,
                              const void* q, void* out, cudaStream_t stream) const;
  // The mma.sync prefill kernel over the step's tiles.
  absl::Status EnqueuePrefill(int layer, const DeviceStep& s, const void* q, void* out,
                              cudaStream_t stream) const;

  KvShape shape_;  // per rank: H_q, H_kv, D, page_size, kv_elem_bytes
  int32_t num_layers_ = 0;
  decode::DType dtype_ = decode::DType::kBFloat16;  // q, out; the pages' unless FP8
  KvCacheDtype kv_dtype_ = KvCacheDtype::kAuto;
  std::vector<Fp8KvScales> kv_scales_;       // [L]
  std::unique_ptr<DecodeAttention> decode_;  // null: decode rows use the generic kernel
  bool prefill_tensor_cores_ = false;        // prefill rows use the mma.sync kernel
  bool uniform_ = false;                     // every row through one kernel (see above)
  bool split_ = false;                       // ... as split tiles
  DeviceBuffer split_partials_;              // one window's partial slots (split tiles)
  float softmax_scale_ = 1.f;
  DeviceBuffer inv_freq_;  // double [D / 2]
  int64_t num_pages_ = 0;
  DeviceBuffer pool_;  // [L][K|V][num_pages][H_kv][page_size][D] of kv_elem_bytes
  std::vector<void*> k_cache_, v_cache_;  // [L] per-layer bases into pool_
};

}  // namespace pkv::cuda_backend
